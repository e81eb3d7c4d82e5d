"""Reads one ready line (ortfleet start --ready-line, or the Python anchor) on stdin and prints, in one
line, the wall time and each worker's spawn offset and cuInit time: python3 cuinit_summary.py LABEL"""
import json
import sys

report = json.loads(next(line for line in sys.stdin if line.startswith("{")))
origin = report["spawn_ns"]
workers = sorted((e["lane"], (e["start_ns"] - origin) / 1e6, (e["end_ns"] - e["start_ns"]) / 1e6)
                 for e in report["timeline"]["events"] if e["name"] == "cuda.init")
print(f"{sys.argv[1]:14} wall {report['wall_ms']:7.1f} ms  cuInit " +
      "  ".join(f"{lane}@{start:.0f}+{ms:.0f}" for lane, start, ms in workers), flush=True)
