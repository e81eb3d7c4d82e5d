#!/usr/bin/env python3
"""One line per `ortfleet start --json` file: the wall time (exec to every device ready) and each phase's
time per lane (the process lane, then each device), so that a start on N GPUs can be read against a start
on one phase by phase. Then, for files named CASE-R.json (R = the round), each case's median wall time
and the min-max over its rounds. Usage: phases_summary.py FILE..."""
import re
import statistics
import sys

from reports import reports

SHORT = {"process.start": "exec", "runtime.load": "rt", "ep.library.load": "eplib", "cuda.init": "cuInit", "ep.register": "epreg",
         "cuda.context": "ctx", "model.read": "read", "weights.upload": "upload", "session.create": "create", "cache.verify": "verify",
         "warmup": "warm", "shape.costs": "costs", "libraries.prime": "prime"}


def main(paths):
    cases = {}
    for path, report in reports(paths):
        lanes = {}
        for e in report["timeline"]["events"]:
            if e["name"] == "ready":
                continue
            lane = lanes.setdefault(e["lane"], {})
            lane[e["name"]] = lane.get(e["name"], 0) + e["duration_ms"]
        name = path.rsplit("/", 1)[-1]
        wall = report.get("wall_ms", 0)
        cases.setdefault(re.sub(r"-[0-9]+\.json$", "", name), []).append(wall)
        parts = []
        for lane in sorted(lanes, key=lambda l: (l != "process", l)):
            body = " ".join(f"{SHORT.get(k, k)}={v:.0f}" for k, v in lanes[lane].items())
            parts.append(f"[{lane}] {body}")
        cache = {e["args"].get("model_cache") for e in report["timeline"]["events"] if e["name"] == "session.create"} - {None}
        print(f"{name:30} wall {wall:7.0f} ms  cache={','.join(sorted(cache)) or '-'}  " + "  ".join(parts))
    print(f"\n{'case':30} {'median':>8} {'min':>7} {'max':>7} rounds")
    for case, walls in sorted(cases.items()):
        print(f"{case:30} {statistics.median(walls):8.0f} {min(walls):7.0f} {max(walls):7.0f} {len(walls)}")


if __name__ == "__main__":
    main(sys.argv[1:])
