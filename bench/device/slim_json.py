#!/usr/bin/env python3
"""Copies `ortfleet profile --json` files without their bulky fields (the timeline with ONNX Runtime's
per-node events runs to tens of MB for node-heavy graphs), so that a device call's results fit what
comes back. Usage: slim_json.py FILE... --to FOLDER"""
import json
import os
import sys

from reports import reports


def main(argv):
    to = argv[argv.index("--to") + 1]
    files = argv[: argv.index("--to")]
    os.makedirs(to, exist_ok=True)
    for path, report in reports(files):
        for key, value in list(report.items()):
            size = len(json.dumps(value))
            if size > 20000:
                report[key] = f"(dropped: {size} bytes)"
        with open(os.path.join(to, os.path.basename(path)), "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1:])
