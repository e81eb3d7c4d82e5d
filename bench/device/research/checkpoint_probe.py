#!/usr/bin/env python3
"""Research probe for issue 51 (a warm node that costs almost nothing). Runs on the GPU machine with
nothing but the driver (ctypes on libcuda.so.1 and libnvidia-ml.so.1): no ONNX Runtime, no torch.

  checkpoint_probe.py OUT_JSON [--only PREFIX,...]   (e.g. --only restorers: just those experiments)

Measures, each in fresh child processes that hold a CUDA context (and optionally memory) and wait:
  context   - a bare primary context's GPU memory (NVML, per process), its host memory (PSS) running and
              checkpointed, and what cuCtxSetLimit (stack size, printf FIFO, malloc heap) gives back;
  scaling   - restoring k checkpointed processes at once (k = 1, 2, ..., one per GPU): per-call and
              wall times, against the bytes each holds (0, 2 GiB): does the driver serialise
              restores across processes, as it serialises cuInit and context creation?
  one_proc  - one process with a context (and 1 GiB) on every GPU: one checkpoint and one restore for
              all of them, against one process per GPU.
  restorers - the k restores issued at once from k processes (each cuInit'd before), not from k threads
              of one: is the serialisation the calling process's or the driver's?
Prints a summary and writes everything to OUT_JSON."""
import ctypes
import json
import os
import subprocess
import sys
import threading
import time

from device_facts import Nvml, smaps

CU_LIMIT_STACK_SIZE, CU_LIMIT_PRINTF_FIFO_SIZE, CU_LIMIT_MALLOC_HEAP_SIZE = 0, 1, 2


def driver():
    cu = ctypes.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0, "cuInit failed"
    return cu


def check(r, what):
    if r != 0:
        raise RuntimeError(f"{what} failed: CUresult {r}")


# --- the child: contexts (and memory) on the GPUs it sees, then commands on stdin --------------------
def child(mib):
    t0 = time.monotonic()
    cu = driver()
    t_init = time.monotonic()
    n = ctypes.c_int()
    check(cu.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    ctxs = []
    for i in range(n.value):
        dev = ctypes.c_int()
        check(cu.cuDeviceGet(ctypes.byref(dev), i), "cuDeviceGet")
        ctx = ctypes.c_void_p()
        check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        if mib > 0:
            ptr = ctypes.c_uint64()
            check(cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(mib << 20)), "cuMemAlloc")
            check(cu.cuMemsetD8_v2(ptr, ctypes.c_ubyte(1), ctypes.c_size_t(mib << 20)), "cuMemsetD8")
        check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        ctxs.append(ctx)
    t_ready = time.monotonic()
    print(json.dumps({"ready": True, "gpus": n.value, "init_ms": (t_init - t0) * 1e3, "contexts_ms": (t_ready - t_init) * 1e3}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "limit":  # limit KIND BYTES on every context
            kind, value = int(words[1]), int(words[2])
            out = []
            for ctx in ctxs:
                check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
                r = cu.cuCtxSetLimit(kind, ctypes.c_size_t(value))
                got = ctypes.c_size_t()
                cu.cuCtxGetLimit(ctypes.byref(got), kind)
                out.append({"rc": r, "now": got.value})
            print(json.dumps({"limit": kind, "asked": value, "contexts": out}), flush=True)
        elif words[0] == "touch":  # a CUDA call after a restore: proves the context works
            t = time.monotonic()
            for ctx in ctxs:
                check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
                check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
            print(json.dumps({"touch_ms": (time.monotonic() - t) * 1e3}), flush=True)
        elif words[0] == "quit":
            break


# --- a restorer: cuInit'd, restores the pids it is given on stdin ------------------------------------
def restorer():
    cu = driver()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        pid = int(words[1])
        t = time.monotonic()
        r1 = cu.cuCheckpointProcessRestore(pid, None)
        t1 = time.monotonic()
        r2 = cu.cuCheckpointProcessUnlock(pid, None)
        print(json.dumps({"restore_rc": r1, "unlock_rc": r2, "restore_ms": (t1 - t) * 1e3, "unlock_ms": (time.monotonic() - t1) * 1e3,
                          "start": t, "end": time.monotonic()}), flush=True)


# --- the parent ---------------------------------------------------------------------------------------
class Child:
    def __init__(self, gpus, mib):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpus)
        self.p = subprocess.Popen([sys.executable, __file__, "--child", str(mib)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env, text=True)
        self.ready = json.loads(self.p.stdout.readline())
        self.pid = self.p.pid

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def end(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        except OSError:
            pass
        self.p.wait(timeout=30)


class Checkpoint:
    def __init__(self, cu):
        self.cu = cu

    def park(self, pid):
        t = time.monotonic()
        check(self.cu.cuCheckpointProcessLock(pid, None), "lock")
        t1 = time.monotonic()
        check(self.cu.cuCheckpointProcessCheckpoint(pid, None), "checkpoint")
        return {"lock_ms": (t1 - t) * 1e3, "checkpoint_ms": (time.monotonic() - t1) * 1e3}

    def unpark(self, pid):
        t = time.monotonic()
        check(self.cu.cuCheckpointProcessRestore(pid, None), "restore")
        t1 = time.monotonic()
        check(self.cu.cuCheckpointProcessUnlock(pid, None), "unlock")
        return {"restore_ms": (t1 - t) * 1e3, "unlock_ms": (time.monotonic() - t1) * 1e3, "start": t, "end": time.monotonic()}


def at_once(fn, items):
    results = [None] * len(items)

    def one(i):
        try:
            results[i] = fn(items[i])
        except Exception as e:  # noqa: BLE001 - recorded, the probe goes on
            results[i] = {"error": str(e)}
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(items))]
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results, (time.monotonic() - t) * 1e3


def gpu_mem_of(nvml, pid):
    return {g: d.get(pid, 0) for g, d in nvml.processes().items() if isinstance(d, dict)}


def context_experiment(nvml, ck, gpu_count):
    out = {}
    c = Child("0", 0)
    out["start"] = c.ready
    out["nvml_processes"] = {g: {str(k): v for k, v in d.items()} for g, d in nvml.processes().items()}
    out["running"] = {"gpu": gpu_mem_of(nvml, c.pid), "smaps": smaps(c.pid)}
    limits = {}
    for kind, name, values in [(CU_LIMIT_STACK_SIZE, "stack", [1024, 256, 0]), (CU_LIMIT_PRINTF_FIFO_SIZE, "printf_fifo", [0]),
                               (CU_LIMIT_MALLOC_HEAP_SIZE, "malloc_heap", [0])]:
        for v in values:
            said = c.ask(f"limit {kind} {v}")
            limits[f"{name}={v}"] = {"said": said, "gpu": gpu_mem_of(nvml, c.pid)}
    out["limits"] = limits
    out["park"] = ck.park(c.pid)
    time.sleep(0.5)
    out["parked"] = {"gpu": gpu_mem_of(nvml, c.pid), "smaps": smaps(c.pid)}
    out["unpark"] = ck.unpark(c.pid)
    out["after"] = {"touch": c.ask("touch"), "gpu": gpu_mem_of(nvml, c.pid)}
    c.end()
    # the same with a small stack limit set before parking, fresh process
    c = Child("0", 0)
    c.ask(f"limit {CU_LIMIT_STACK_SIZE} 0")
    out["trimmed_park"] = ck.park(c.pid)
    time.sleep(0.5)
    out["trimmed_parked_smaps"] = smaps(c.pid)
    out["trimmed_unpark"] = ck.unpark(c.pid)
    out["trimmed_touch"] = c.ask("touch")
    c.end()
    return out


def scaling_experiment(nvml, ck, gpu_count, mib, rounds=3):
    children = [Child(str(g), mib) for g in range(gpu_count)]
    out = {"mib": mib, "gpus": gpu_count, "starts": [c.ready for c in children], "running_smaps": [smaps(c.pid) for c in children],
           "running_gpu": [gpu_mem_of(nvml, c.pid) for c in children], "rounds": []}
    for r in range(rounds):
        for k in sorted({1, 2, gpu_count} if gpu_count >= 2 else {1}):
            if k > gpu_count:
                continue
            parks, park_wall = at_once(lambda c: ck.park(c.pid), children)
            parked_smaps = [smaps(c.pid) for c in children] if r == 0 and k == 1 else None
            chosen = children[:k]
            restores, wall = at_once(lambda c: ck.unpark(c.pid), chosen)
            t0 = min(x["start"] for x in restores if "start" in x) if all("start" in x for x in restores) else 0
            for x in restores:
                if "start" in x:
                    x["start_ms"] = (x.pop("start") - t0) * 1e3
                    x["end_ms"] = (x.pop("end") - t0) * 1e3
            rest, _ = at_once(lambda c: ck.unpark(c.pid), children[k:])
            out["rounds"].append({"round": r, "k": k, "park_wall_ms": park_wall, "parks": parks, "restore_wall_ms": wall,
                                  "restores": restores, "parked_smaps": parked_smaps,
                                  "touch": [c.ask("touch") for c in chosen]})
    for c in children:
        c.end()
    return out


def one_process_experiment(nvml, ck, gpu_count, mib, rounds=3):
    c = Child(",".join(str(g) for g in range(gpu_count)), mib)
    out = {"mib_per_gpu": mib, "gpus": gpu_count, "start": c.ready, "running_gpu": gpu_mem_of(nvml, c.pid), "rounds": []}
    for r in range(rounds):
        park = ck.park(c.pid)
        un = ck.unpark(c.pid)
        un.pop("start")
        un.pop("end")
        out["rounds"].append({"park": park, "unpark": un, "touch": c.ask("touch")})
    c.end()
    return out


def restorers_experiment(nvml, ck, gpu_count, mib, rounds=3):
    children = [Child(str(g), mib) for g in range(gpu_count)]
    helpers = [subprocess.Popen([sys.executable, __file__, "--restorer"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for _ in range(gpu_count)]
    for h in helpers:
        json.loads(h.stdout.readline())
    out = {"mib": mib, "gpus": gpu_count, "rounds": []}
    for r in range(rounds):
        for k in sorted({1, gpu_count}):
            at_once(lambda c: ck.park(c.pid), children)
            t = time.monotonic()
            for h, c in zip(helpers[:k], children[:k]):
                h.stdin.write(f"restore {c.pid}\n")
                h.stdin.flush()
            said = [json.loads(h.stdout.readline()) for h in helpers[:k]]
            wall = (time.monotonic() - t) * 1e3
            for x in said:
                x["start_ms"] = (x.pop("start") - t) * 1e3
                x["end_ms"] = (x.pop("end") - t) * 1e3
            at_once(lambda c: ck.unpark(c.pid), children[k:])
            out["rounds"].append({"round": r, "k": k, "wall_ms": wall, "restores": said, "touch": [c.ask("touch") for c in children[:k]]})
    for h in helpers:
        h.stdin.write("quit\n")
        h.stdin.flush()
        h.wait(timeout=30)
    for c in children:
        c.end()
    return out


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        child(int(sys.argv[2]))
        return
    if len(sys.argv) >= 2 and sys.argv[1] == "--restorer":
        restorer()
        return
    out_path = sys.argv[1]
    cu = driver()
    nvml = Nvml()
    ck = Checkpoint(cu)
    gpus = len(nvml.handles)
    result = {"gpus": gpus}
    steps = [("context", lambda: context_experiment(nvml, ck, gpus))]
    for mib in (0, 2048):
        steps.append((f"scaling_{mib}", lambda mib=mib: scaling_experiment(nvml, ck, gpus, mib, rounds=2)))
    if gpus > 1:
        steps.append(("one_process_1024", lambda: one_process_experiment(nvml, ck, gpus, 1024, rounds=2)))
        steps.append(("restorers_0", lambda: restorers_experiment(nvml, ck, gpus, 0)))
        steps.append(("restorers_1024", lambda: restorers_experiment(nvml, ck, gpus, 1024)))
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else []
    steps = [(n, f) for n, f in steps if not only or any(n.startswith(o) for o in only)]
    for name, fn in steps:
        t = time.monotonic()
        try:
            result[name] = fn()
        except Exception as e:  # noqa: BLE001 - one failed experiment must not lose the others
            result[name] = {"error": repr(e)}
        print(f"{name}: {(time.monotonic() - t):.1f} s", flush=True)
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
    summarise(result)


def summarise(r):
    c = r.get("context", {})
    mb = 1 / (1 << 20)
    if "running" in c:
        print(f"bare context: GPU {sum(c['running']['gpu'].values()) * mb:.0f} MiB; PSS running {c['running']['smaps'].get('Pss', 0) * mb:.0f} MiB, "
              f"parked {c['parked']['smaps'].get('Pss', 0) * mb:.0f} MiB (trimmed first: {c.get('trimmed_parked_smaps', {}).get('Pss', 0) * mb:.0f})")
        for k, v in c["limits"].items():
            print(f"  after {k}: GPU {sum(v['gpu'].values()) * mb:.0f} MiB ({v['said']['contexts'][0]})")
        print(f"  park {c['park']}, unpark {c['unpark'].get('restore_ms', 0):.1f} ms")
    for prefix, key_of, said in (("scaling_", "restore_wall_ms", "restore wall ms by k at once"),
                                 ("restorers_", "wall_ms", "restore wall ms by k at once, each from a process of its own")):
        for key in [k for k in r if k.startswith(prefix)]:
            s = r[key]
            if "rounds" not in s:
                print(key, s)
                continue
            by_k = {}
            for rd in s["rounds"]:
                by_k.setdefault(rd["k"], []).append(round(rd[key_of]))
            print(f"{key}: {said}: " + ", ".join(f"k={k}: {sorted(v)}" for k, v in sorted(by_k.items())))
    if "one_process_1024" in r and "rounds" in r["one_process_1024"]:
        print("one process on every GPU: restore ms", [round(x["unpark"]["restore_ms"], 1) for x in r["one_process_1024"]["rounds"]])


if __name__ == "__main__":
    main()
