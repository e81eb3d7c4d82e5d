#!/usr/bin/env python3
"""Research probe for issue 51: what a pool's workers hold, active and parked, measured from outside.

  pool_memory_probe.py OUT_JSON --devices LIST --models M1,M2 [--serve-args "..."] [--left] [--repeat N]

One pool per call, on a private socket and an empty model cache:
  --serve-args   `ortfleet serve --devices LIST --park-after 3 ARGS` in the background (a node daemon), or
  --left         no serve: the pool the first `ortfleet start` of the first model leaves behind.
At each step, for every worker the pool lists (`pool status --json`): its role, its host memory from
/proc/PID/smaps_rollup (Rss, Pss, Pss_Anon, Pss_File, Anonymous) and its own GPU memory (NVML's compute
processes; 0 while parked), and each GPU's memory in use:
  ready         the pool's workers up, no model
  parked        after park-after (no model)
  M active      after `ortfleet start M --pool S` (the job exits; the pool keeps the session)
  M parked      once parked again
  M next        `ortfleet start M --pool S --json` on the parked pool, N times, each timed from outside
                (a fresh process, exec to exit), re-parked between
Writes OUT_JSON and prints a table. $ORTFLEET is the CLI."""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

from device_facts import Nvml, smaps

ORTFLEET = os.environ.get("ORTFLEET", "ortfleet")


def run(args, env, timeout=600):
    t = time.monotonic()
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    return p, (time.monotonic() - t) * 1e3


def pool_status(env, socket):
    p, _ = run([ORTFLEET, "pool", "status", "--socket", socket, "--json"], env, timeout=60)
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"error": p.stdout[-2000:] + p.stderr[-2000:]}


def snapshot(nvml, env, socket, label):
    st = pool_status(env, socket)
    gpu = nvml.by_pid() if nvml else {}
    workers = []
    for d in st.get("devices", []):
        pid = d.get("pid", 0)
        m = smaps(pid) if pid else {}
        workers.append({"device": d.get("device"), "role": d.get("role"), "state": d.get("state"), "pid": pid, "parked": d.get("parked"),
                        "sessions": len(d.get("sessions", [])), "rss": m.get("Rss", 0), "pss": m.get("Pss", 0),
                        "pss_anon": m.get("Pss_Anon", 0), "pss_file": m.get("Pss_File", 0), "anonymous": m.get("Anonymous", 0),
                        "gpu_own": gpu.get(pid, 0)})
    snap = {"label": label, "workers": workers, "gpu_used": nvml.used() if nvml else [],
            "total_pss": sum(w["pss"] for w in workers), "total_rss": sum(w["rss"] for w in workers),
            "total_gpu_own": sum(w["gpu_own"] for w in workers)}
    if "error" in st:
        snap["status_error"] = st["error"]
    mb = 1 / (1 << 20)
    print(f"--- {label}: {len(workers)} workers, PSS {snap['total_pss'] * mb:.0f} MiB, RSS {snap['total_rss'] * mb:.0f} MiB, "
          f"own GPU {snap['total_gpu_own'] * mb:.0f} MiB, GPU used {[round(u * mb) for u in snap['gpu_used']]}", flush=True)
    for w in workers:
        print(f"    {w['device']:7} {w['role'] or '':9} pid {w['pid']:6} parked={w['parked']!s:5} sessions={w['sessions']} "
              f"PSS {w['pss'] * mb:6.0f} (anon {w['pss_anon'] * mb:6.0f}, file {w['pss_file'] * mb:5.0f}) RSS {w['rss'] * mb:6.0f} "
              f"GPU {w['gpu_own'] * mb:5.0f} MiB", flush=True)
    return snap


def wait_parked(env, socket, timeout_s=60):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        st = pool_status(env, socket)
        devs = [d for d in st.get("devices", []) if d.get("state") == "ready"]
        if devs and all(d.get("parked") or d.get("park_note") for d in devs):
            return True
        time.sleep(0.5)
    return False


def wait_ready(env, socket, timeout_s=180):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        st = pool_status(env, socket)
        devs = st.get("devices", [])
        if devs and all(d.get("state") in ("ready", "failed") for d in devs):
            return st
        time.sleep(0.5)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--devices", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--serve-args", default="")
    ap.add_argument("--left", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--park", type=float, default=3)
    a = ap.parse_args()
    try:
        nvml = Nvml()
    except OSError:
        nvml = None
    root = tempfile.mkdtemp(prefix="ortfleet-memprobe-")
    run_dir = os.path.join(root, "run")
    os.makedirs(run_dir, mode=0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=run_dir, ORTFLEET_CACHE=os.path.join(root, "cache"))
    socket = os.path.join(run_dir, "ortfleet", "pool.sock")
    result = {"devices": a.devices, "serve_args": a.serve_args, "left": a.left, "steps": [], "starts": {}}
    models = a.models.split(",")
    serve = None
    try:
        if a.left:
            env["ORTFLEET_WARM_POOL_PARK"] = str(a.park)
            p, ms = run([ORTFLEET, "start", models[0], "--devices", a.devices, "--json"], env)
            result["starts"]["first_left"] = {"ms": ms, "rc": p.returncode, "tail": p.stderr[-1500:]}
            print(f"first start (leaves the pool): {ms:.0f} ms rc={p.returncode}", flush=True)
            time.sleep(1)
            wait_ready(env, socket)
            result["steps"].append(snapshot(nvml, env, socket, f"{os.path.basename(models[0])} left, active"))
            wait_parked(env, socket)
            result["steps"].append(snapshot(nvml, env, socket, f"{os.path.basename(models[0])} left, parked"))
        else:
            os.makedirs(os.path.dirname(socket), mode=0o700, exist_ok=True)
            cmd = [ORTFLEET, "serve", "--devices", a.devices, "--socket", socket, "--park-after", str(a.park)] + shlex.split(a.serve_args)
            t = time.monotonic()
            serve = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "serve.log"), "w"))
            st = wait_ready(env, socket)
            result["serve_ready_ms"] = (time.monotonic() - t) * 1e3
            print(f"serve ready in {result['serve_ready_ms']:.0f} ms ({'ok' if st else 'timed out'})", flush=True)
            result["steps"].append(snapshot(nvml, env, socket, "ready, no model"))
            wait_parked(env, socket)
            result["steps"].append(snapshot(nvml, env, socket, "parked, no model"))
        for m in models:
            name = os.path.basename(m)
            if not a.left or m != models[0]:
                p, ms = run([ORTFLEET, "start", m, "--pool", socket, "--devices", a.devices, "--json"], env)
                result["starts"][f"{name} new session"] = {"ms": ms, "rc": p.returncode, "tail": p.stderr[-800:]}
                print(f"{name}: new session on the pool {ms:.0f} ms rc={p.returncode}", flush=True)
                result["steps"].append(snapshot(nvml, env, socket, f"{name} active"))
                wait_parked(env, socket)
                result["steps"].append(snapshot(nvml, env, socket, f"{name} parked"))
            times = []
            for _ in range(a.repeat):
                wait_parked(env, socket)
                time.sleep(0.5)
                p, ms = run([ORTFLEET, "start", m, "--pool", socket, "--devices", a.devices, "--json"], env)
                times.append(ms)
                if p.returncode != 0:
                    print(p.stderr[-1500:], flush=True)
            result["starts"][f"{name} next on parked pool"] = {"ms": times, "last_json": p.stdout[-30000:]}
            print(f"{name}: next start on the parked pool (CLI, exec to exit): {[round(t) for t in times]} ms", flush=True)
            result["steps"].append(snapshot(nvml, env, socket, f"{name} after next"))
    finally:
        p, ms = run([ORTFLEET, "pool", "stop", "--socket", socket], env, timeout=120)
        result["stop_ms"] = ms
        print(f"pool stop: {ms:.0f} ms rc={p.returncode}", flush=True)
        if serve:
            try:
                serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                serve.kill()
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
