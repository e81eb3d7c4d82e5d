"""A PyTorch job's start as users write it, timed in one fresh process:
    python3 pytorch_job.py MODEL [--prewarm] [--pool SOCKET] [--no-torch]
--prewarm: ortfleet.prewarm() first (it returns at once), then torch is imported and initialised on
every GPU, then the fleet starts; without it the fleet starts cold after torch. --pool: the fleet
starts on the pool of `ortfleet serve` at SOCKET. Prints one JSON line: torch_ms (import torch and a
tensor on every GPU), fleet_ms (Fleet(...) until every device is ready, after torch), resident."""
import json
import sys
import time

t0 = time.monotonic()
import ortfleet  # noqa: E402

model = sys.argv[1]
pool = sys.argv[sys.argv.index("--pool") + 1] if "--pool" in sys.argv else None
prewarmed = ortfleet.prewarm() if "--prewarm" in sys.argv else None
t1 = time.monotonic()
gpus = 0
if "--no-torch" not in sys.argv:
    import torch

    gpus = torch.cuda.device_count()
    for i in range(gpus):
        torch.zeros(1, device=f"cuda:{i}")
        torch.cuda.synchronize(i)
t2 = time.monotonic()
pool_states = [d["state"] for d in prewarmed.status()["devices"]] if prewarmed else []
fleet = ortfleet.Fleet(model, pool=pool) if pool else ortfleet.Fleet(model)
fleet.start()
ok = fleet.wait()
t3 = time.monotonic()
status = fleet.status()
phases = {}
for e in fleet.timeline()["events"]:
    key = f'{e["lane"]} {e["name"]}'
    phases[key] = round(phases.get(key, 0) + (e["end_ns"] - e["start_ns"]) / 1e6, 1)
print(json.dumps({"mode": "prewarm" if "--prewarm" in sys.argv else ("pool" if pool else "cold"), "ok": ok,
                  "torch_gpus": gpus, "import_ortfleet_ms": (t1 - t0) * 1e3, "torch_ms": (t2 - t1) * 1e3,
                  "fleet_ms": (t3 - t2) * 1e3, "resident": [s["resident"] for s in status],
                  "errors": [s["error"] for s in status if s["error"]], "pool_when_torch_was_done": pool_states,
                  "pids": [s["pid"] for s in status], "phases_ms": phases}), flush=True)
fleet.shutdown()
