#!/usr/bin/env python3
"""What users run today: one onnxruntime InferenceSession per device from Python.

`ortfleet bench` runs this script in a fresh process per measurement, next to its own strategies.
Modes: sequential (a loop), threads (a thread per device), spawn (a multiprocessing pool with the
"spawn" start method, one process per device), and ortfleet (ortfleet's own Python API, to show
that starting a fleet from Python costs what the command line's fleet does). The CUDA EP is attached the way ortfleet attaches it:
register_execution_provider_library + get_ep_devices + SessionOptions.add_provider_for_devices.

Prints one JSON line in the shape of `ortfleet start --ready-line` when every device is ready
(session created and one inference run on generated inputs). With --shape-mix it instead streams
inferences whose batch size cycles through the mix on one session of the first device, the status
quo that `ortfleet bench --inference --shape-mix` compares shape-aware sessions with, and prints one
JSON line with the throughput and latencies.
"""
import time

MAIN_NS = time.monotonic_ns()  # CLOCK_MONOTONIC, the clock ortfleet uses; taken before any import below

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
_REGISTER_LOCK = threading.Lock()
_REGISTERED = []


def make_inputs(session, seed, batch=1):
    """Generated inputs; a dynamic first dim takes `batch`, other dynamic dims 1."""
    shapes = {i.name: [d if isinstance(d, int) and d > 0 else (batch if k == 0 else 1) for k, d in enumerate(i.shape)]
              for i in session.get_inputs()}
    return stream_inputs(session, shapes, seed)


def start_one(model, device, cuda_ep, conv_algo, options=None, warm=True):
    """Create one session on `device` ("cpu", "cpu:1" or "cuda:N") and run one inference (`warm`)."""
    import onnxruntime as ort

    so = options or ort.SessionOptions()
    if device.startswith("cuda:"):
        ordinal = device.split(":")[1]
        with _REGISTER_LOCK:  # once per process; threads race here otherwise
            if not _REGISTERED:
                ort.register_execution_provider_library("ortfleet.cuda", cuda_ep)
                _REGISTERED.append(cuda_ep)
        eps = [d for d in ort.get_ep_devices()
               if d.ep_name == "CUDAExecutionProvider" and d.ep_options.get("device_id", "0") == ordinal]
        if not eps:
            raise RuntimeError(f"the CUDA EP offers no device {device}")
        so.add_provider_for_devices(eps, {"cudnn_conv_algo_search": conv_algo})
        session = ort.InferenceSession(model, sess_options=so)
    else:
        session = ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])
    if warm:
        session.run(None, make_inputs(session, 1))
    return session, time.monotonic_ns()


def spawn_worker(args):
    model, device, cuda_ep, conv_algo = args
    try:
        _, ready = start_one(model, device, cuda_ep, conv_algo)
        return device, ready, os.getpid(), ""
    except Exception as e:  # reported per device, as ortfleet does
        return device, time.monotonic_ns(), os.getpid(), str(e)


def shape_mix(a, device):
    """One session, a stream of calls whose batch cycles through the mix (or is drawn from it)."""
    import random

    session, _ = start_one(a.model, device, a.cuda_ep, a.conv_algo)
    batches = [int(b) for b in a.shape_mix.split(",")]
    feeds = {b: make_inputs(session, 7, b) for b in batches}
    first = {}
    for b in batches:  # the first call of each shape after ready, as a user's first requests meet it
        start = time.monotonic_ns()
        session.run(None, feeds[b])
        first[b] = (time.monotonic_ns() - start) / 1e6
    rng = random.Random(7)
    latencies = []
    deadline = time.monotonic() + a.seconds
    i = 0
    while time.monotonic() < deadline:
        b = rng.choice(batches) if a.order == "random" else batches[i % len(batches)]
        i += 1
        start = time.monotonic_ns()
        session.run(None, feeds[b])
        latencies.append((time.monotonic_ns() - start) / 1e6)
    latencies.sort()

    def pct(p):
        if not latencies:
            return 0.0
        rank = p / 100 * (len(latencies) - 1)
        lo, hi = int(rank), min(int(rank) + 1, len(latencies) - 1)
        return latencies[lo] + (latencies[hi] - latencies[lo]) * (rank - lo)

    print(json.dumps({"ortfleet_throughput_row": 1, "inferences_per_s": len(latencies) / a.seconds, "p50_ms": pct(50),
                      "p99_ms": pct(99), "first_call_ms": max(first.values())}), flush=True)


def stream_inputs(session, shapes, seed):
    """Generated inputs of the given shapes ({name: dims}); token ids in the model's recorded range."""
    import numpy as np

    rng = np.random.default_rng(seed)
    meta = session.get_modelmeta().custom_metadata_map
    dtypes = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_, "tensor(uint8)": np.uint8}
    feeds = {}
    for i in session.get_inputs():
        dtype = dtypes[i.type]
        shape = shapes[i.name]
        if np.issubdtype(dtype, np.floating):
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(dtype)
        else:
            lo, hi = 0, 1
            if "ortfleet.input_range." + i.name in meta:
                lo, hi = (int(v) for v in meta["ortfleet.input_range." + i.name].split(","))
            feeds[i.name] = rng.integers(lo, hi + 1, shape).astype(dtype)
    return feeds


def shape_stream(a, device):
    """One session, the stream of shapes in the --shape-stream file (a JSON list of {input: dims}),
    every call timed; then the stream's first shape, steady: what `bench --shape-stream` compares."""
    import onnxruntime as ort

    with open(a.shape_stream) as f:
        stream = json.load(f)
    so = ort.SessionOptions()
    if a.intra_threads > 0:
        so.intra_op_num_threads = a.intra_threads
    if a.no_spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    session, _ = start_one(a.model, device, a.cuda_ep, a.conv_algo, so, warm=False)
    feeds = {}
    for call in stream:
        key = json.dumps(call, sort_keys=True)
        if key not in feeds:
            feeds[key] = stream_inputs(session, call, 7 + len(feeds))
    first = feeds[json.dumps(stream[0], sort_keys=True)]
    session.run(None, first)  # warm-up: the first shape, once
    ms = []
    for call in stream:
        feed = feeds[json.dumps(call, sort_keys=True)]
        start = time.monotonic_ns()
        session.run(None, feed)
        ms.append((time.monotonic_ns() - start) / 1e6)
    session.run(None, first)
    steady = []
    for _ in range(30):
        start = time.monotonic_ns()
        session.run(None, first)
        steady.append((time.monotonic_ns() - start) / 1e6)
    steady.sort()
    print(json.dumps({"ortfleet_stream_row": 1, "ms": ms, "steady_p50_ms": (steady[14] + steady[15]) / 2}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("model")
    p.add_argument("--devices", required=True, help="comma-separated: cuda:0,cuda:1 or cpu,cpu:1")
    p.add_argument("--mode", choices=["sequential", "threads", "spawn", "ortfleet"], required=True)
    p.add_argument("--cuda-ep", default="", help="path of libonnxruntime_providers_cuda.so")
    p.add_argument("--conv-algo", default="EXHAUSTIVE")
    p.add_argument("--shape-mix", default="", help="batch sizes, e.g. 1,2: stream them through one session instead")
    p.add_argument("--order", choices=["cycle", "random"], default="cycle")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--shape-stream", default="", help="a JSON list of {input: dims}: stream them through one session instead")
    p.add_argument("--intra-threads", type=int, default=0, help="with --shape-stream: intra-op threads (0: onnxruntime's choice)")
    p.add_argument("--no-spinning", action="store_true", help="with --shape-stream: idle threads do not spin")
    a = p.parse_args()
    devices = a.devices.split(",")
    if a.shape_stream:
        shape_stream(a, devices[0])
        return
    if a.shape_mix:
        shape_mix(a, devices[0])
        return
    results = {}  # device -> (ready_ns, pid, error)
    sessions = []

    def one(device):
        try:
            s, ready = start_one(a.model, device, a.cuda_ep, a.conv_algo)
            sessions.append(s)
            results[device] = (ready, os.getpid(), "")
        except Exception as e:
            results[device] = (time.monotonic_ns(), os.getpid(), str(e))

    phases = []  # the fleet's own timeline, when the mode is ortfleet
    if a.mode == "ortfleet":
        import_ns = time.monotonic_ns()
        import ortfleet

        phases.append({"name": "python.import", "lane": "process", "start_ns": import_ns, "end_ns": time.monotonic_ns(),
                       "pid": os.getpid(), "args": {"module": "ortfleet"}})
        fleet = ortfleet.Fleet(a.model, devices=devices, strategy="fleet",
                               config={"cuda": {"conv_algo_search": a.conv_algo}})
        fleet.start()
        fleet.wait()
        done = time.monotonic_ns()
        for s in fleet.status():
            results[s["device"]] = (done, s["pid"], s["error"])
        phases += [e for e in fleet.timeline()["events"] if e["name"] != "ready"]
        sessions.append(fleet)
    elif a.mode == "sequential":
        for d in devices:
            one(d)
    elif a.mode == "threads":
        threads = [threading.Thread(target=one, args=(d,)) for d in devices]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        # Not multiprocessing.Pool: its map() waits forever once a worker dies of a signal (a crash
        # inside ONNX Runtime); an executor fails the waiting futures at once.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(len(devices), mp_context=ctx) as pool:
            futures = {d: pool.submit(spawn_worker, (a.model, d, a.cuda_ep, a.conv_algo)) for d in devices}
            for d, f in futures.items():
                try:
                    device, ready, pid, error = f.result()
                except BrokenProcessPool as e:
                    device, ready, pid, error = d, time.monotonic_ns(), 0, f"a pool process died (a crash inside ONNX Runtime?): {e}"
                results[device] = (ready, pid, error)

    spawn_ns = int(os.environ.get("ORTFLEET_SPAWN_NS", MAIN_NS))
    ready_ns = max(r[0] for r in results.values())
    events = [{"name": "process.start", "lane": "process", "start_ns": spawn_ns, "end_ns": MAIN_NS, "pid": os.getpid(), "args": {}}]
    events += [{k: e[k] for k in ("name", "lane", "start_ns", "end_ns", "pid", "args")} for e in phases]
    events += [{"name": "ready", "lane": d, "start_ns": r[0], "end_ns": r[0], "pid": r[1], "args": {}} for d, r in results.items()]
    print(json.dumps({
        "ortfleet_start": 1, "model": a.model, "strategy": "python-" + a.mode,
        "devices": [{"device": d, "state": "failed" if r[2] else "ready", "error": r[2], "provider": "onnxruntime-python",
                     "ready_ms": (r[0] - MAIN_NS) / 1e6, "ready_ns": r[0], "pid": r[1]} for d, r in results.items()],
        "spawn_ns": spawn_ns, "main_ns": MAIN_NS, "ready_ns": ready_ns, "wall_ms": (ready_ns - spawn_ns) / 1e6,
        "all_ready": all(not r[2] for r in results.values()),
        "timeline": {"origin_ns": spawn_ns, "events": events},
    }), flush=True)
    os._exit(0 if all(not r[2] for r in results.values()) else 3)  # skip slow session teardown


if __name__ == "__main__":
    main()
