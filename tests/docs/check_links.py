#!/usr/bin/env python3
"""Checks that every relative link of the project's Markdown pages resolves.

Usage: check_links.py [REPO_ROOT]   (default: two folders above this file)

Pages: README.md, CHANGELOG.md, docs/*.md, docs/results/index.md, bench/device/README.md. A link
[text](target) or ![alt](target) whose target is not a URL must name a file or folder that exists,
relative to the page; a #fragment on a Markdown page must name one of that page's headings (GitHub's
anchors). Links inside code (fenced blocks and `spans`) are not links. Exits 1 and lists each broken
link as PAGE:LINE: TARGET (why).
"""
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`]*`")


def pages(root):
    found = [os.path.join(root, name) for name in ("README.md", "CHANGELOG.md")]
    docs = os.path.join(root, "docs")
    found += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    found += [os.path.join(docs, "results", "index.md"), os.path.join(root, "bench", "device", "README.md")]
    return [p for p in found if os.path.exists(p)]


def lines_outside_code(text, keep_code_spans=False):
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line if keep_code_spans else CODE_SPAN.sub("", line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    seen = {}
    out = set()
    with open(path, encoding="utf-8") as f:
        # A heading's code spans are part of its anchor ("## `warmup`" is #warmup).
        for _, line in lines_outside_code(f.read(), keep_code_spans=True):
            m = re.match(r"#{1,6}\s+(.*)", line)
            if not m:
                continue
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def check(root):
    broken = []
    for page in pages(root):
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for number, line in lines_outside_code(text):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                path, _, fragment = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                where = f"{os.path.relpath(page, root)}:{number}: {target}"
                if not os.path.exists(resolved):
                    broken.append(f"{where} (no such file)")
                elif fragment and resolved.endswith(".md") and fragment not in anchors(resolved):
                    broken.append(f"{where} (no heading with that anchor)")
    return broken


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    broken = check(os.path.abspath(root))
    for b in broken:
        print(b)
    if broken:
        print(f"{len(broken)} broken link(s)")
        return 1
    print("ok: every relative link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
