"""A PyTorch job's inference through ortfleet, as users write it: torch CUDA tensors in, outputs left on
the GPU (torch.from_dlpack), one Python thread per GPU. Sessions in this process (strategy threads)
against a worker process per GPU (strategy processes: tensors cross by CUDA IPC), per batch size.
    python3 torch_workers.py MODEL [SECONDS] [BATCHES]     MODEL: a dynamic-batch model with input "input"
Prints one JSON line per batch and strategy (inferences/s, p50/p99 ms per call, transfer counters),
then a line per batch: workers / in-process. Warm: every session is ready and has run each batch
before the clock starts."""
import json
import sys
import threading
import time

import torch

import ortfleet

model = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
batches = [int(b) for b in (sys.argv[3] if len(sys.argv) > 3 else "1,32").split(",")]
gpus = torch.cuda.device_count()


def measure(strategy, batch):
    with ortfleet.Fleet(model, devices=list(range(gpus)), strategy=strategy, batches=batches) as fleet:
        assert fleet.start().wait(), fleet.status()
        shape = [batch] + [d for d in fleet.inputs[0]["shape"][1:]]
        inputs = [torch.rand(shape, device=f"cuda:{i}") for i in range(gpus)]
        for i in range(gpus):  # warm: the batch's session has run once
            for _ in range(3):
                torch.from_dlpack(next(iter(fleet.run(i, {"input": inputs[i]}, outputs_on_device=True).values())))
        before = fleet.transfer_counters()
        latencies = [[] for _ in range(gpus)]
        stop = time.monotonic() + seconds

        def hammer(i):
            while time.monotonic() < stop:
                t = time.perf_counter()
                out = fleet.run(i, {"input": inputs[i]}, outputs_on_device=True)
                torch.from_dlpack(next(iter(out.values())))
                latencies[i].append(time.perf_counter() - t)

        threads = [threading.Thread(target=hammer, args=(i,)) for i in range(gpus)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        after = fleet.transfer_counters()
        every = sorted(x for per in latencies for x in per)
        return {"strategy": strategy, "batch": batch, "gpus": gpus,
                "inferences_per_s": sum(len(p) for p in latencies) * batch / elapsed,
                "calls": len(every), "p50_ms": every[len(every) // 2] * 1e3, "p99_ms": every[int(len(every) * 0.99)] * 1e3,
                "counters": {k: after[k] - before[k] for k in after}}


for batch in batches:
    rows = {}
    for strategy in ("threads", "processes"):
        rows[strategy] = measure(strategy, batch)
        print(json.dumps(rows[strategy]), flush=True)
    ratio = rows["processes"]["inferences_per_s"] / rows["threads"]["inferences_per_s"]
    print(f"batch {batch}, {gpus} GPU(s), torch CUDA inputs, outputs on the GPU: workers reach {ratio:.3f}x the "
          f"in-process throughput ({rows['processes']['inferences_per_s']:.0f} vs {rows['threads']['inferences_per_s']:.0f} "
          f"inferences/s); staged bytes through the host: {rows['processes']['counters']['inputs_staged_bytes'] + rows['processes']['counters']['outputs_staged_bytes']}",
          flush=True)
