"""The JSON reports a bench/device summary reads: each file's (path, report), with one line for a file
that cannot be read (a step that failed leaves an empty one)."""
import json


def reports(paths):
    for path in paths:
        try:
            with open(path) as f:
                yield path, json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: unreadable ({e})")
