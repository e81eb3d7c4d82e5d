#!/usr/bin/env python3
"""The README's bench sample in the table and verdict `ortfleet bench` prints today, from a bench's JSON
of before (issue 59: the README showed `min median max ... efficiency`, the format before issue 52).

Usage: render_bench.py BENCH.json  (docs/results/2026-11-23/2xH200/bench_r50.json for the README)

It prints what the current bench's table (src/diagnostics/bench_rows.cpp) and verdict
(src/diagnostics/bench_verdict.cpp) make of the rows' own timed rounds (`wall_ms`): each row's mean ± σ
(the sample σ), min, max and "vs 1 device" (its mean over its baseline row's), then the fastest cold
start of every device and each other cold start against it, with the ratio's ± (each mean's relative
σ added in quadrature) and "within noise" where their ranges overlap or the ± reaches 1. Nothing is
measured again: the numbers are the run's.
"""
import json
import math
import statistics
import sys


def duration_text(ms):
    """src/base/units.cpp's duration_text: three significant digits."""
    if ms < 0.1:
        return f"{ms * 1000:.1f} us"
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 100:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60000:
        return f"{ms / 1000:.2f} s"
    seconds = round(ms / 1000)
    return f"{seconds // 60} min {seconds % 60} s"


def mean_text(times):
    mean = statistics.mean(times)
    return duration_text(mean) + (f" ± {duration_text(statistics.stdev(times))}" if len(times) >= 2 else "")


def compare(base, other):
    """src/diagnostics/statistics.cpp's compare_times: the ratio of the means, its ±, within noise."""
    a, b = statistics.mean(base), statistics.mean(other)
    ratio = b / a
    sigma = ratio * math.sqrt((statistics.stdev(base) / a) ** 2 + (statistics.stdev(other) / b) ** 2)
    overlap = min(base) <= max(other) and min(other) <= max(base)
    return ratio, sigma, overlap, overlap or abs(ratio - 1) <= sigma


def main():
    result = json.load(open(sys.argv[1]))
    rows = [r for r in result["rows"] if not r.get("error") and r.get("wall_ms")]
    by_label = {r["label"]: r for r in rows}
    table = [["start-up", "devices", "mean ± σ", "min", "max", "vs 1 device"]]
    for r in rows:
        base = by_label.get(r.get("baseline", ""))
        vs = f"{statistics.mean(r['wall_ms']) / statistics.mean(base['wall_ms']):.2f}x" if base else ""
        table.append([r["label"], str(r["devices"]), mean_text(r["wall_ms"]), duration_text(min(r["wall_ms"])),
                      duration_text(max(r["wall_ms"])), vs])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for n, row in enumerate(table):
        print("  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    devices = max(r["devices"] for r in rows)
    # The cold starts of every device (not a warm pool's, not a cache's variant), fastest first.
    cold = sorted((r for r in rows if r["devices"] == devices and not any(w in r["label"] for w in ("warm pool", "resident", "cache"))),
                  key=lambda r: statistics.mean(r["wall_ms"]))
    fastest = cold[0]
    gpus = f"{devices} GPUs" if result["machine"].split(" x ")[0].strip().isdigit() else f"{devices} CPU sessions"
    print(f"\nfastest start-up of {gpus}: {fastest['label']}, {mean_text(fastest['wall_ms'])} ({len(fastest['wall_ms'])} rounds, mean ± σ)")
    for other in cold[1:]:
        ratio, sigma, overlap, within = compare(fastest["wall_ms"], other["wall_ms"])
        if within:
            print(f"  within noise of {other['label']} ({mean_text(other['wall_ms'])}, {ratio:.2f} ± {sigma:.2f}x; "
                  f"{'their ranges overlap' if overlap else 'the ± covers 1'})")
        else:
            print(f"  {ratio:.2f} ± {sigma:.2f}x faster than {other['label']} ({mean_text(other['wall_ms'])})")


if __name__ == "__main__":
    main()
