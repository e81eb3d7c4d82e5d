#!/usr/bin/env python3
"""One line per `ortfleet profile --json` file: session creation, the cold start, its floor and the ratio."""
import sys

from reports import reports


def phase_ms(report, names):
    return sum(p["ms"] for p in report["phases"] if p["name"] in names)


def main(paths):
    print(f"{'case':44} {'session.create':>14} {'ortfleet upload':>15} {'upload GB/s':>11} {'wall':>9} {'floor':>9} {'ratio':>6}  per term (measured/floor)")
    for path, r in reports(paths):
        create = phase_ms(r, {"model.load", "session.setup", "graph.optimization", "partitioning", "initializer.upload",
                              "kernel.creation", "session.other", "session.create"})
        ortfleet_upload = phase_ms(r, {"weights.upload"})
        terms = " ".join(f"{t['name']} {t['measured_ms']:.0f}/{t['floor_ms']:.0f}" for t in r.get("floor", {}).get("terms", []))
        case = path.rsplit("/", 1)[-1].removesuffix(".json")
        print(f"{case:44} {create:12.0f} ms {ortfleet_upload:12.0f} ms {r['upload_gb_per_s']:11.1f} {r['wall_ms']:7.0f} ms {r['floor_ms']:7.0f} ms "
              f"{r['floor_ratio']:5.2f}x  {terms}")


if __name__ == "__main__":
    main(sys.argv[1:])
