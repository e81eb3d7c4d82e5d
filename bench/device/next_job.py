#!/usr/bin/env python3
"""The next job on a node, as users meet it (issue 42): Python jobs, each a fresh process timed from
outside, from exec to its first output on GPU 0, with ortfleet.Fleet's defaults.

  next_job.py OUT_JSON MODEL [--shapes NAME=DIMS] [--repeat N] [--park SECONDS]

Per repeat, in a fresh runtime folder and an empty model cache, one after another:
  plain       onnxruntime's Python API (CUDA EP as a plugin), what users run today
  plain-ortfleet  ortfleet.Fleet with no pool and no model cache (ONNX Runtime reads the model)
  first       ortfleet's first start on an empty cache (it leaves a warm pool and hands its worker over)
  next        the next job, right after the first exits
  next2       the one after that, right after
  parked      once the pool has parked (no GPU memory held), the model resident
  parked-new  after `pool evict`, parked again: a new session on a parked pool
  daemon-new     on a node whose daemon (`ortfleet serve --detach`, as its systemd unit runs it) started,
                 primed and parked before any job: the first job of a model it never saw, empty cache
  daemon-cached  the same on a fresh daemon whose node has the model's cache entry (made by the daemon of
                 daemon-new after that job): a model new to the daemon, not to the node
Each job's time, its resident flag and the pool's GPU memory (nvidia-smi) while parked go to OUT_JSON;
a summary with medians and ratios to the plain start is printed."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def ortfleet_job(model, shapes, plain=False):
    import numpy as np
    import ortfleet
    kw = {"shapes": shapes} if shapes else {}
    if plain:  # ortfleet's plain start: no pool, no cache (ONNX Runtime reads the model)
        kw.update(pool=False, config={"session": {"optimized_model_cache": False}})
    with ortfleet.Fleet(model, **kw) as fleet:
        fleet.start()
        fleet.wait()
        feeds = {}
        for i in fleet.inputs:
            dims = dict(s.split("=") for s in [shapes] if s).get(i["name"]) if shapes else None
            shape = [int(d) for d in dims.split("x")] if dims else [d if d > 0 else 1 for d in i["shape"]]
            feeds[i["name"]] = np.zeros(shape, i.get("type", "float32"))
        fleet.run(fleet.devices[0], feeds)
        print("first-output", flush=True)
        st = fleet.status()[0]
        print(json.dumps({"resident": st.get("resident"), "pid": st.get("pid"), "left_behind": fleet.left_behind()}), flush=True)


def ort_job(model, shapes):
    import numpy as np
    import onnxruntime as ort
    ort.register_execution_provider_library("job.cuda", os.environ["ORTFLEET_CUDA_EP"])
    eps = [d for d in ort.get_ep_devices() if d.ep_name == "CUDAExecutionProvider" and d.ep_options.get("device_id", "0") == "0"]
    so = ort.SessionOptions()
    so.add_provider_for_devices(eps, {})
    s = ort.InferenceSession(model, sess_options=so)
    feeds = {}
    for i in s.get_inputs():
        dims = dict(x.split("=") for x in [shapes] if x).get(i.name) if shapes else None
        shape = [int(d) for d in dims.split("x")] if dims else [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        ort_types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
                     "tensor(bool)": np.bool_}
        feeds[i.name] = np.zeros(shape, ort_types.get(i.type, np.float32))
    s.run(None, feeds)
    print("first-output", flush=True)
    print(json.dumps({}), flush=True)


def timed_job(kind, model, shapes, env):
    """Exec to the line 'first-output', from outside; then waits for the process to end."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, __file__, "--job", kind, model, shapes or ""], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    first = None
    info = {}
    for line in p.stdout:
        if line.strip() == "first-output" and first is None:
            first = (time.monotonic() - t0) * 1e3
        elif line.startswith("{"):
            info = json.loads(line)
    err = p.stderr.read()
    p.wait()
    exited = (time.monotonic() - t0) * 1e3
    return {"kind": kind, "first_output_ms": first, "exited_ms": exited, "rc": p.returncode, "stderr_tail": err[-1500:], **info}


def pool_status(env):
    r = subprocess.run([os.environ["ORTFLEET"], "-q", "pool", "status", "--json"], capture_output=True, text=True, env=env)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {}


def await_parked(env, timeout_s):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        s = pool_status(env)
        workers = s.get("devices", [])
        if workers and all(w.get("parked") for w in workers if w.get("device", "").startswith("cuda")):
            return s, time.monotonic() - t0
        time.sleep(0.2)
    return pool_status(env), None


def gpu_used_mib():
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    return {"used_mib": [int(x) for x in out.split()], "apps": [a.strip() for a in apps.splitlines() if a.strip()]}


def node_env(name):
    """The environment of a node of its own: a fresh runtime folder (the pool's socket) and an empty cache."""
    env = dict(os.environ)
    run = f"/tmp/nextjob-run-{name}"
    cache = f"/tmp/nextjob-cache-{name}"
    for d in (run, cache):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(run, mode=0o700)
    env.update(XDG_RUNTIME_DIR=run, ORTFLEET_CACHE=cache)
    env.pop("ORTFLEET_AUTO_POOL", None)
    return env


def node_daemon_jobs(model, shapes, park, r):
    """The first job of a model on a parked node daemon: on an empty cache, then (a new daemon) on the
    cache entry the first daemon made."""
    env = node_env(f"daemon-{r}")
    jobs = {}
    for kind in ("daemon-new", "daemon-cached"):
        t0 = time.monotonic()
        started = subprocess.run([os.environ["ORTFLEET"], "-q", "serve", "--detach", "--park-after", str(park)], env=env, capture_output=True,
                                 text=True)
        if started.returncode != 0:
            jobs[kind] = {"kind": kind, "first_output_ms": None, "rc": started.returncode, "stderr_tail": started.stderr[-1500:]}
            continue
        status, waited = await_parked(env, 180)
        jobs[kind] = timed_job("ortfleet", model, shapes, env)
        jobs[kind]["daemon_parked_after_s"] = (time.monotonic() - t0) if waited is not None else None
        jobs[kind]["daemon_status_parked"] = status
        print(f"round {r} {kind}: {jobs[kind]['first_output_ms']} ms rc {jobs[kind]['rc']} resident {jobs[kind].get('resident')}", flush=True)
        if jobs[kind]["rc"] != 0:
            print(jobs[kind]["stderr_tail"], flush=True)
        # The daemon makes the model's cache entry in the background after the job: wait for it.
        t1 = time.monotonic()
        while time.monotonic() - t1 < 180 and pool_status(env).get("cache_fills"):
            time.sleep(0.5)
        subprocess.run([os.environ["ORTFLEET"], "-q", "pool", "stop"], env=env, capture_output=True)
    return jobs


def one_round(model, shapes, park, r):
    env = node_env(str(r))
    env.update(ORTFLEET_WARM_POOL_PARK=str(park))
    run = env["XDG_RUNTIME_DIR"]
    jobs = {}
    for kind, job in (("plain", "ort"), ("plain-ortfleet", "ortfleet-plain"), ("first", "ortfleet"), ("next", "ortfleet"), ("next2", "ortfleet")):
        jobs[kind] = timed_job(job, model, shapes, env)
        print(f"round {r} {kind}: {jobs[kind]['first_output_ms']} ms rc {jobs[kind]['rc']} resident {jobs[kind].get('resident')}", flush=True)
        if jobs[kind]["rc"] != 0:
            print(jobs[kind]["stderr_tail"], flush=True)
    status, waited = await_parked(env, 120)
    parked = {"waited_s": waited, "gpu": gpu_used_mib(), "status": status}
    print(f"round {r}: parked after {waited} s; GPU {parked['gpu']}", flush=True)
    jobs["parked"] = timed_job("ortfleet", model, shapes, env)
    subprocess.run([os.environ["ORTFLEET"], "-q", "pool", "evict"], env=env, capture_output=True)
    await_parked(env, 120)
    jobs["parked-new"] = timed_job("ortfleet", model, shapes, env)
    subprocess.run([os.environ["ORTFLEET"], "-q", "pool", "stop"], env=env, capture_output=True)
    after_stop = gpu_used_mib()
    log = ""
    try:
        log = open(os.path.join(run, "ortfleet", "pool.sock.log")).read()[-6000:]
    except OSError:
        pass
    jobs.update(node_daemon_jobs(model, shapes, park, r))
    return {"jobs": jobs, "parked": parked, "after_stop": after_stop, "pool_log": log}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        kind, model, shapes = sys.argv[2], sys.argv[3], sys.argv[4]
        if kind == "ort":
            ort_job(model, shapes)
        else:
            ortfleet_job(model, shapes, plain=kind == "ortfleet-plain")
        return
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("model")
    p.add_argument("--shapes", default="")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--park", type=float, default=3)
    a = p.parse_args()
    rounds = [one_round(a.model, a.shapes, a.park, r) for r in range(a.repeat)]
    json.dump({"model": a.model, "park_after_s": a.park, "rounds": rounds}, open(a.out, "w"), indent=1)
    name = os.path.basename(a.model)
    kinds = ["plain", "plain-ortfleet", "first", "next", "next2", "parked", "parked-new", "daemon-new", "daemon-cached"]
    med = {}
    for k in kinds:
        xs = [r["jobs"][k]["first_output_ms"] for r in rounds if r["jobs"][k]["first_output_ms"]]
        med[k] = statistics.median(xs) if xs else float("nan")
    # The plain start a job would make today: the faster of onnxruntime's Python API and ortfleet with no
    # cache and no pool, in this run.
    plain = min(med["plain"], med["plain-ortfleet"])
    print(f"{name}: exec to first output, median of {a.repeat} (GPU 0, fresh processes); x plain = against the faster of plain and plain-ortfleet")
    for k in kinds:
        xs = [r["jobs"][k]["first_output_ms"] for r in rounds]
        res = [r["jobs"][k].get("resident") for r in rounds]
        rcs = [r["jobs"][k]["rc"] for r in rounds]
        print(f"  {k:11s} {med[k]:8.0f} ms  {med[k] / plain:5.2f}x plain   runs {['%.0f' % x if x else 'FAIL' for x in xs]} resident {res} rc {rcs}")
    for r in rounds:
        print(f"  parked after {r['parked']['waited_s']} s: GPU {r['parked']['gpu']}; after pool stop: {r['after_stop']}")


if __name__ == "__main__":
    main()
