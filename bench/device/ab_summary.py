#!/usr/bin/env python3
"""Start-up of two builds, measured alternately in one run: `ab_summary.py PREFIX` reads
PREFIX_base_*.json and PREFIX_new_*.json (each from `ortfleet bench --export-json`) and prints, per
row label, the median wall time of each build over every timed round, and their ratio."""
import glob
import json
import statistics
import sys

prefix = sys.argv[1]
rounds = {"base": {}, "new": {}}
for build in rounds:
    for path in sorted(glob.glob(f"{prefix}_{build}_*.json")):
        for row in json.load(open(path))["rows"]:
            rounds[build].setdefault(row["label"], []).extend(row["wall_ms"])
for label in sorted(set(rounds["base"]) & set(rounds["new"])):
    base, new = rounds["base"][label], rounds["new"][label]
    if not base or not new:
        continue
    b, n = statistics.median(base), statistics.median(new)
    print(f"{label}: base median {b:.0f} ms ({len(base)} rounds, {min(base):.0f}-{max(base):.0f}), "
          f"new median {n:.0f} ms ({len(new)} rounds, {min(new):.0f}-{max(new):.0f}): new/base = {n / b:.2f}")
