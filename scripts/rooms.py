#!/usr/bin/env python3
"""The arrows between the rooms of a layer (src/<layer>/<room>/): which room includes which, and which
arrows run back up.

    scripts/rooms.py engine            # arrows of src/engine, against the order src/CMakeLists.txt declares
    scripts/rooms.py fleet --json

A file's room is its folder; a public header, include/ortfleet/<layer>/NAME.hpp, belongs to the room of
NAME.cpp (the build's rule: cmake/OrtfleetLayers.cmake). An arrow runs back up when it reaches a room
declared after its own (ORTFLEET_ROOMS_<layer>); without a declared order, against the order that leaves
the fewest arrows back up. The build enforces the declared order; this prints what it sees, for reviews.
"""
import argparse
import itertools
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^#include [<"](ortfleet/)?([a-z_]+)/([a-z_]+)(/[a-z_]+)?\.hpp[>"]', re.M)


def declared_order(layer):
    text = (ROOT / "src" / "CMakeLists.txt").read_text()
    m = re.search(r"set\(ORTFLEET_ROOMS_%s ([a-z_ ]+)\)" % layer, text)
    return m.group(1).split() if m else None


def header_rooms(layer):
    """Public header name -> its room: the room holding NAME.cpp."""
    rooms = {}
    for cpp in (ROOT / "src" / layer).glob("*/*.cpp"):
        rooms[cpp.stem] = cpp.parent.name
    return rooms


def arrows(layer):
    """Counter of (from room, to room) -> include lines, and a list of public headers with no room."""
    headers = header_rooms(layer)
    files = [(p, p.parent.name) for p in (ROOT / "src" / layer).glob("*/*.[ch]pp")]
    homeless = []
    for h in (ROOT / "include" / "ortfleet" / layer).glob("*.hpp"):
        if h.stem in headers:
            files.append((h, headers[h.stem]))
        else:
            homeless.append(str(h.relative_to(ROOT)))
    found = Counter()
    for path, room in files:
        for public, inc_layer, first, rest in INCLUDE.findall(path.read_text()):
            if inc_layer != layer:
                continue
            if public:
                target = headers.get(first)  # ortfleet/<layer>/NAME.hpp
            else:
                target = first if rest else None  # <layer>/<room>/NAME.hpp
            if target is not None and target != room:
                found[(room, target)] += 1
    return found, homeless


def back_up(found, order):
    rank = {room: i for i, room in enumerate(order)}
    return [(a, b) for (a, b) in found if rank.get(b, len(rank)) > rank.get(a, len(rank))]


def best_order(found):
    rooms = sorted({r for pair in found for r in pair})
    if len(rooms) > 9:
        return rooms
    return list(min(itertools.permutations(rooms), key=lambda order: len(back_up(found, order))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("layer", help="a folder of src/ with rooms: engine, fleet")
    parser.add_argument("--json", action="store_true", help="print the arrows as JSON")
    args = parser.parse_args()
    found, homeless = arrows(args.layer)
    order = declared_order(args.layer)
    source = "declared in src/CMakeLists.txt" if order else "the order with the fewest arrows back up"
    if not order:
        order = best_order(found)
    up = back_up(found, order)
    if args.json:
        print(json.dumps({"layer": args.layer, "order": order, "order_source": source,
                          "arrows": [{"from": a, "to": b, "includes": n, "up": (a, b) in up} for (a, b), n in sorted(found.items())],
                          "back_up": len(up), "headers_without_room": homeless}, indent=2))
        return 0
    print(f"src/{args.layer}: rooms, lowest first ({source}): {' '.join(order)}")
    for (a, b), n in sorted(found.items(), key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order else 99, kv[0][1])):
        print(f"  {a:>10} -> {b:<10} {n:3d} include{'s' if n != 1 else ''}{'   BACK UP' if (a, b) in up else ''}")
    print(f"{len(found)} arrows, {len(up)} back up")
    for h in homeless:
        print(f"  {h}: no NAME.cpp in any room of src/{args.layer}, so no room")
    return 0


if __name__ == "__main__":
    sys.exit(main())
