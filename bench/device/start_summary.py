#!/usr/bin/env python3
"""One line per `ortfleet start --json` file: ready time, session creation, first inference, and the
parts of ortfleet's weight upload (its timeline event's arguments). Then, for files named CASE-N.json
(N = the round), each case's medians over its rounds."""
import re
import statistics
import sys

from reports import reports


def main(paths):
    rounds = {}
    for path, report in reports(paths):
        totals = {}
        upload = {}
        for event in report["timeline"]["events"]:
            totals[event["name"]] = totals.get(event["name"], 0) + event["duration_ms"]
            if event["name"] == "weights.upload":
                upload = event["args"]
        device = report["devices"][0]
        case = re.sub(r"-[0-9]+\.json$", "", path.rsplit("/", 1)[-1])
        rounds.setdefault(case, []).append((device["ready_ms"], totals.get("session.create", 0) + totals.get("weights.upload", 0)))
        parts = " ".join(f"{k}={v}" for k, v in sorted(upload.items()))
        print(f"{path.rsplit('/', 1)[-1]:34} ready {device['ready_ms']:6.0f} ms  create {totals.get('session.create', 0):5.0f}"
              f"  upload {totals.get('weights.upload', 0):5.0f}  warmup {totals.get('warmup', 0):5.0f}  {parts}")


    print(f"\n{'case (median of rounds)':34} {'ready':>8} {'upload + session.create':>24}  rounds")
    for case, values in sorted(rounds.items()):
        ready = statistics.median(v[0] for v in values)
        session = statistics.median(v[1] for v in values)
        print(f"{case:34} {ready:5.0f} ms {session:21.0f} ms  {len(values)}")


if __name__ == "__main__":
    main(sys.argv[1:])
