#!/usr/bin/env python3
"""Research probe for issues 42 and 43 (run on the GPU machine; plan: research-a.plan).

  gpu_warmup_probe.py cudnn MODEL OUT_JSON [--algo EXHAUSTIVE|HEURISTIC] [--shim SO]
      one fresh process: session, first inference, 20 more; with the shim preloaded, cuDNN's backend
      calls timed by function and descriptor type per phase, and the plans that ran (engine, knobs)
  gpu_warmup_probe.py checkpoint MODEL OUT_JSON
      a session in a child process parked and restored through the driver's checkpoint API, 3 times;
      two at once; GPU memory (nvidia-smi) and host memory around it; outputs after restore against
      before; kill -9 of a parked child
The ONNX Runtime here is onnxruntime's Python API with the CUDA EP registered as a plugin
($ORTFLEET_CUDA_EP), as bench/anchors/onnxruntime_python.py does."""
import ctypes
import glob
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time


def session_for(model, algo):
    import onnxruntime as ort
    ort.register_execution_provider_library("probe.cuda", os.environ["ORTFLEET_CUDA_EP"])
    eps = [d for d in ort.get_ep_devices() if d.ep_name == "CUDAExecutionProvider" and d.ep_options.get("device_id", "0") == "0"]
    so = ort.SessionOptions()
    so.add_provider_for_devices(eps, {"cudnn_conv_algo_search": algo})
    return ort.InferenceSession(model, sess_options=so)


def inputs_for(session):
    import numpy as np
    rng = np.random.default_rng(1)
    out = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        out[i.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def checksum(outputs):
    return [float(abs(o).astype("float64").sum()) for o in outputs]


def child(model, algo, serve):
    shim = None
    try:
        shim = ctypes.CDLL(os.environ["CUDNN_SHIM"]) if os.environ.get("CUDNN_SHIM") else None
    except OSError:
        shim = None
    mark = (lambda name: shim.cudnn_shim_phase(name.encode())) if shim else (lambda name: None)
    t0 = time.monotonic()
    mark("session")
    s = session_for(model, algo)
    t1 = time.monotonic()
    feeds = inputs_for(s)
    mark("first_run")
    first = s.run(None, feeds)
    t2 = time.monotonic()
    mark("later_runs")
    later = []
    for _ in range(20):
        a = time.monotonic()
        s.run(None, feeds)
        later.append((time.monotonic() - a) * 1e3)
    mark("end")
    if shim:
        shim.cudnn_shim_write()
    print(json.dumps({"event": "ready", "pid": os.getpid(), "session_ms": (t1 - t0) * 1e3, "first_run_ms": (t2 - t1) * 1e3,
                      "later_p50_ms": statistics.median(later), "checksum": checksum(first)}), flush=True)
    if not serve:
        return
    for line in sys.stdin:
        if line.strip() == "run":
            a = time.monotonic()
            out = s.run(None, feeds)
            print(json.dumps({"event": "ran", "ms": (time.monotonic() - a) * 1e3, "checksum": checksum(out)}), flush=True)
        elif line.strip() == "quit":
            break


def enum_values(include_dirs, enum_name):
    """The enumerators of `typedef enum {...} enum_name;` in cuDNN's headers, implicit values counted."""
    for d in include_dirs:
        for h in glob.glob(os.path.join(d, "cudnn*.h")):
            text = open(h, errors="replace").read()
            m = re.search(r"typedef\s+enum\s*\w*\s*\{([^}]*)\}\s*" + enum_name + r"\s*;", text)
            if not m:
                continue
            body = re.sub(r"/\*.*?\*/|//[^\n]*", "", m.group(1), flags=re.S)
            values, nxt = {}, 0
            for item in body.split(","):
                item = item.strip()
                if not item:
                    continue
                if "=" in item:
                    k, v = (x.strip() for x in item.split("=", 1))
                    try:
                        nxt = int(v, 0)
                    except ValueError:
                        nxt = values.get(v, nxt)
                else:
                    k = item
                values[k] = nxt
                nxt += 1
            return values
    return {}


def cudnn_include_dirs():
    import nvidia
    return sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "cudnn", "include")))


def cudnn_mode(model, out, algo, shim, record="", replay=""):
    env = dict(os.environ)
    if record:
        env["CUDNN_SHIM_RECORD"] = record
    if replay:
        env["CUDNN_SHIM_REPLAY"] = replay
    names = {}
    if shim:
        inc = cudnn_include_dirs()
        attrs = enum_values(inc, "cudnnBackendAttributeName_t")
        types = enum_values(inc, "cudnnBackendAttributeType_t")
        descs = enum_values(inc, "cudnnBackendDescriptorType_t")
        env.update(LD_PRELOAD=shim, CUDNN_SHIM=shim, CUDNN_SHIM_OUT=out + ".shim.json",
                   CUDNN_SHIM_JSON_ATTR=str(attrs.get("CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION", -1)),
                   CUDNN_SHIM_CHAR_TYPE=str(types.get("CUDNN_TYPE_CHAR", -1)))
        names = {"descriptor": {v: k for k, v in descs.items()}, "attribute": {v: k for k, v in attrs.items()}}
    t = time.monotonic()
    r = subprocess.run([sys.executable, __file__, "child", model, algo], env=env, capture_output=True, text=True, timeout=600)
    result = {"algo": algo, "shim": os.path.basename(shim), "record": record, "replay": replay, "wall_ms": (time.monotonic() - t) * 1e3, "rc": r.returncode,
              "stderr_tail": r.stderr[-2000:]}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            result.update(json.loads(line))
    if shim and os.path.exists(out + ".shim.json"):
        raw = json.load(open(out + ".shim.json"))
        result["phases_ms"] = {k: v / 1e6 for k, v in raw["phases"].items()}
        result["counters"] = raw.get("counters", {})
        result["recorded"] = raw.get("recorded")
        summary = {}
        for key, calls, ns, max_ns, failed in raw["cells"]:
            parts = key.split("|")
            phase, fn = parts[0], parts[1]
            desc = names["descriptor"].get(int(parts[2]), parts[2]) if len(parts) > 2 and parts[2].lstrip("-").isdigit() else ""
            attr = names["attribute"].get(int(parts[3]), parts[3]) if len(parts) > 3 else ""
            row = summary.setdefault(phase, {}).setdefault(f"{fn} {desc} {attr}".strip(), [0, 0.0, 0.0, 0])
            row[0] += calls
            row[1] += ns / 1e6
            row[2] = max(row[2], max_ns / 1e6)
            row[3] += failed
        result["by_call"] = {p: dict(sorted(rows.items(), key=lambda kv: -kv[1][1])) for p, rows in summary.items()}
        result["executed_plans"] = raw.get("executed", [])
    json.dump(result, open(out, "w"), indent=1)
    print(json.dumps({k: v for k, v in result.items() if k not in ("by_call", "executed_plans", "stderr_tail")}))
    if result["rc"] != 0:
        print(result["stderr_tail"])
    for p, rows in result.get("by_call", {}).items():
        total = sum(r[1] for r in rows.values())
        print(f"  {p}: {total:.1f} ms in cuDNN backend calls")
        for k, (calls, ms, mx, failed) in list(rows.items())[:12]:
            print(f"    {k:70s} {calls:7d} calls {ms:9.1f} ms (max {mx:.2f}, failed {failed})")
    if result.get("executed_plans"):
        print(f"  {len(result['executed_plans'])} plans ran; first: {result['executed_plans'][0][0][:300]}")


class Driver:
    """The driver's checkpoint API through libcuda (ctypes)."""

    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.names = ["cuCheckpointProcessLock", "cuCheckpointProcessCheckpoint", "cuCheckpointProcessRestore",
                      "cuCheckpointProcessUnlock", "cuCheckpointProcessGetState"]
        self.missing = [n for n in self.names if not hasattr(self.cu, n)]

    def call(self, name, pid, args=None):
        t = time.monotonic()
        r = getattr(self.cu, name)(ctypes.c_int(pid), args)
        return r, (time.monotonic() - t) * 1e3

    def lock(self, pid, timeout_ms=10000):
        class LockArgs(ctypes.Structure):
            _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]
        a = LockArgs(timeout_ms, 0)
        return self.call("cuCheckpointProcessLock", pid, ctypes.byref(a))

    def state(self, pid):
        s = ctypes.c_int(-1)
        r = self.cu.cuCheckpointProcessGetState(ctypes.c_int(pid), ctypes.byref(s))
        return r, s.value


def gpu_memory():
    apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    used = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    return {"apps": [l.strip() for l in apps.splitlines() if l.strip()], "used_mib": [int(x) for x in used.split()]}


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return -1


def start_child(model, algo="EXHAUSTIVE"):
    p = subprocess.Popen([sys.executable, __file__, "child", model, algo, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = json.loads(p.stdout.readline())
    return p, ready


def ask_run(p):
    p.stdin.write("run\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def park(drv, pid):
    out = {}
    out["lock_rc"], out["lock_ms"] = drv.lock(pid)
    out["checkpoint_rc"], out["checkpoint_ms"] = drv.call("cuCheckpointProcessCheckpoint", pid)
    out["state_after"] = drv.state(pid)
    return out


def unpark(drv, pid):
    out = {}
    out["restore_rc"], out["restore_ms"] = drv.call("cuCheckpointProcessRestore", pid)
    out["unlock_rc"], out["unlock_ms"] = drv.call("cuCheckpointProcessUnlock", pid)
    out["state_after"] = drv.state(pid)
    return out


def checkpoint_mode(model, out):
    drv = Driver()
    res = {"missing_api": drv.missing, "gpu_before": gpu_memory()}
    if drv.missing:
        json.dump(res, open(out, "w"), indent=1)
        print(res)
        return
    p, ready = start_child(model)
    res["ready"] = ready
    pid = ready["pid"]
    res["lock_before_cuinit"] = drv.lock(pid, 1000)  # expected: not initialised
    if res["lock_before_cuinit"][0] == 0:
        drv.call("cuCheckpointProcessUnlock", pid)
    t = time.monotonic()
    res["cuinit_rc"] = drv.cu.cuInit(0)
    res["cuinit_ms"] = (time.monotonic() - t) * 1e3
    res["gpu_running"] = gpu_memory()
    res["rss_running_mib"] = rss_mib(pid)
    cycles = []
    for i in range(3):
        c = {"park": park(drv, pid)}
        c["gpu_parked"] = gpu_memory()
        c["rss_parked_mib"] = rss_mib(pid)
        time.sleep(0.5)
        c["unpark"] = unpark(drv, pid)
        c["run_after"] = ask_run(p)
        c["run_again"] = ask_run(p)
        c["outputs_equal"] = c["run_after"]["checksum"] == ready["checksum"]
        cycles.append(c)
        print(json.dumps({"cycle": i, "park": c["park"], "unpark": c["unpark"], "run_after_ms": c["run_after"]["ms"],
                          "equal": c["outputs_equal"], "gpu_parked": c["gpu_parked"]}), flush=True)
    res["cycles"] = cycles
    # two at once, as a pool parks a worker and a spare per GPU
    q, ready_q = start_child(model)
    both = {}
    threads = [threading.Thread(target=lambda k=k, x=x: both.__setitem__(k, park(drv, x))) for k, x in (("a", pid), ("b", ready_q["pid"]))]
    t = time.monotonic()
    [th.start() for th in threads]
    [th.join() for th in threads]
    res["two_park_wall_ms"] = (time.monotonic() - t) * 1e3
    res["two_park"] = both
    res["gpu_two_parked"] = gpu_memory()
    both2 = {}
    threads = [threading.Thread(target=lambda k=k, x=x: both2.__setitem__(k, unpark(drv, x))) for k, x in (("a", pid), ("b", ready_q["pid"]))]
    t = time.monotonic()
    [th.start() for th in threads]
    [th.join() for th in threads]
    res["two_unpark_wall_ms"] = (time.monotonic() - t) * 1e3
    res["two_unpark"] = both2
    res["two_runs_after"] = [ask_run(p), ask_run(q)]
    # kill -9 of a parked child: nothing of it may stay on the GPU
    res["kill_park"] = park(drv, ready_q["pid"])
    os.kill(ready_q["pid"], signal.SIGKILL)
    q.wait()
    time.sleep(1)
    res["gpu_after_kill"] = gpu_memory()
    res["survivor_run"] = ask_run(p)
    # SIGTERM of a parked process (a pool stop): does it end?
    res["term_park"] = park(drv, pid)
    p.terminate()
    try:
        p.wait(timeout=10)
        res["term_parked_exit"] = p.returncode
    except subprocess.TimeoutExpired:
        res["term_parked_exit"] = "hung; killed"
        p.kill()
        p.wait()
    time.sleep(1)
    res["gpu_end"] = gpu_memory()
    json.dump(res, open(out, "w"), indent=1)
    print(json.dumps({k: res[k] for k in ("two_park_wall_ms", "two_unpark_wall_ms", "gpu_two_parked", "gpu_after_kill", "term_parked_exit", "gpu_end")}))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "child":
        child(sys.argv[2], sys.argv[3], "--serve" in sys.argv)
    elif mode == "cudnn":
        args = sys.argv[2:]
        algo = args[args.index("--algo") + 1] if "--algo" in args else "EXHAUSTIVE"
        shim = args[args.index("--shim") + 1] if "--shim" in args else ""
        record = args[args.index("--record") + 1] if "--record" in args else ""
        replay = args[args.index("--replay") + 1] if "--replay" in args else ""
        cudnn_mode(args[0], args[1], algo, shim, record, replay)
    elif mode == "checkpoint":
        checkpoint_mode(sys.argv[2], sys.argv[3])
