"""One fleet start from a fresh Python process, each step announced, for chasing a crash on the GPU
machine: python3 python_fleet_once.py MODEL STRATEGY [--doctor-first]"""
import sys
import time

import ortfleet

model, strategy = sys.argv[1], sys.argv[2]
if "--doctor-first" in sys.argv:
    ortfleet.doctor()
    print("doctor done", flush=True)
t0 = time.monotonic()
fleet = ortfleet.Fleet(model, devices=["cuda:0"], strategy=strategy)
print("constructed", flush=True)
fleet.start()
print("started", flush=True)
ok = fleet.wait()
print(f"wait -> {ok} after {time.monotonic() - t0:.2f} s: {[(s['state'], s['error']) for s in fleet.status()]}", flush=True)
import numpy as np  # only now: what is imported before the start is part of the experiment

x = {i["name"]: np.zeros([d if d > 0 else 1 for d in i["shape"]], "float32") for i in fleet.inputs}
out = fleet.run("cuda:0", x)
print("ran", {k: v.shape for k, v in out.items()}, flush=True)
fleet.shutdown()
print("shut down", flush=True)
