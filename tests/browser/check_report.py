#!/usr/bin/env python3
"""An `ortfleet report` in a real browser: Debian's headless Chromium.

Makes results on the CPU with a small synthetic model (bench over two CPU sessions, bench --inference,
profile, tune --quick, start), draws them with `ortfleet report`, and opens the page in Chromium.
Fails when the page logs an error, throws, or tries to fetch anything (its Content-Security-Policy
turns a request into an error the page records), when a chart is missing, has no size, holds no
canvas or no data, or when a chart's part of a screenshot is (nearly) one flat colour.

Exits 77 (ctest: skipped) with a message where no Chromium is installed (apt-get install chromium,
which scripts/bootstrap.sh does).
"""
import argparse
import html.parser
import json
import pathlib
import re
import shutil
import subprocess
import sys

SKIPPED = 77
# Each chart the page must draw from these results (data-chart of its box).
EXPECTED_CHARTS = ["bench-1", "bench-2", "bench-timeline", "throughput", "latency", "profile-shares", "profile-timeline",
                   "tune", "start-timeline"]


def find_chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run(command):
    print("+ " + " ".join(command), flush=True)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def make_results(ortfleet, work):
    model = str(work / "mlp.onnx")
    run([ortfleet, "synth", "mlp", model])
    quiet = ["-q"]
    run([ortfleet, "bench", model, "--devices", "cpu*2", "--runs", "2", "--warmup", "0", "--no-anchors",
         "--export-json", str(work / "bench.json")] + quiet)
    run([ortfleet, "bench", model, "--devices", "cpu*2", "--inference", "--seconds", "0.3", "--no-anchors",
         "--export-json", str(work / "inference.json")] + quiet)
    with open(work / "profile.json", "w") as out:
        print("+ ortfleet profile ... --json > profile.json", flush=True)
        subprocess.run([ortfleet, "profile", model, "--device", "cpu", "--runs", "3", "--json"] + quiet, check=True, stdout=out)
    with open(work / "tune.json", "w") as out:
        print("+ ortfleet tune ... --json > tune.json", flush=True)
        subprocess.run([ortfleet, "tune", model, "--device", "cpu", "--quick", "--runs", "3", "--repeat", "2", "--json"] + quiet, check=True,
                       stdout=out)
    with open(work / "start.json", "w") as out:
        print("+ ortfleet start ... --json > start.json", flush=True)
        subprocess.run([ortfleet, "start", model, "--devices", "cpu*2", "--strategy", "fleet", "--json"] + quiet, check=True, stdout=out)
    crowd(work / "tune.json")
    page = work / "report.html"
    run([ortfleet, "report"] + [str(work / name) for name in ("bench.json", "inference.json", "profile.json", "tune.json", "start.json")]
        + ["-o", str(page)])
    return page


def crowd(tune_json):
    """Adds configurations a hair apart from the first to a tune result, so that their names would
    overlap in the scatter unless the page moves or hides them."""
    result = json.loads(tune_json.read_text())
    first = next(r for r in result["results"] if not r.get("error"))
    for i in range(1, 7):
        twin = dict(first, name=f"crowded configuration {i}", pareto=False)
        twin["ready_mean_ms"] = first["ready_mean_ms"] * (1 + 0.002 * i)
        twin["steady_p50_ms"] = first["steady_p50_ms"] * (1 + 0.002 * i)
        result["results"].append(twin)
    tune_json.write_text(json.dumps(result))


def chromium(browser, work, page, arguments):
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
               "--user-data-dir=" + str(work / "chromium-profile"), "--hide-scrollbars", "--force-device-scale-factor=1",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=15000"] + arguments + [page.as_uri()]
    print("+ " + " ".join(command), flush=True)
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


class PageState(html.parser.HTMLParser):
    """The status element, the chart boxes and the error list the page writes into its DOM."""

    def __init__(self):
        super().__init__()
        self.status = {}
        self.charts = {}
        self.errors = ""
        self._in_errors = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id") == "ortfleet-status":
            self.status = a
        if "data-chart" in a:
            self.charts[a["data-chart"]] = a
        self._in_errors = a.get("id") == "ortfleet-errors"

    def handle_endtag(self, tag):
        self._in_errors = False

    def handle_data(self, data):
        if self._in_errors:
            self.errors += data


def console_problems(stderr):
    """Console lines Chromium logged that are errors: uncaught exceptions and refused requests."""
    lines = [line for line in stderr.splitlines() if ":CONSOLE" in line]
    for line in lines:
        print("console: " + line)
    return [line for line in lines if re.search(r"Uncaught|Refused|Content Security Policy|Failed to load|ERR_", line)]


def distinct_colours(image, box):
    x, y, width, height = box
    colours = image.crop((x, y, x + width, y + height)).getcolors(maxcolors=1 << 16)
    return len(colours) if colours is not None else 1 << 16


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ortfleet", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()

    browser = find_chromium()
    if browser is None:
        print("SKIP: no Chromium installed, so the report is not checked in a browser "
              "(apt-get install chromium, or run scripts/bootstrap.sh)")
        return SKIPPED
    try:
        from PIL import Image
    except ImportError:
        print("FAILED: Chromium is here but Pillow is not, to read its screenshot: apt-get install python3-pil "
              "(scripts/bootstrap.sh installs it)")
        return 1

    work = pathlib.Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    page = make_results(args.ortfleet, work)
    problems = []

    loaded = chromium(browser, work, page, ["--window-size=1280,1000", "--dump-dom"])
    if loaded.returncode != 0:
        print(loaded.stderr)
        print(f"FAILED: chromium --dump-dom exited {loaded.returncode}")
        return 1
    state = PageState()
    state.feed(loaded.stdout)
    problems += [f"console: {line}" for line in console_problems(loaded.stderr)]
    if state.status.get("data-status") != "done":
        problems.append(f"the page's script did not finish (status {state.status.get('data-status')!r})")
    if state.errors.strip():
        problems.append("the page recorded errors:\n" + state.errors.strip())
    for name in EXPECTED_CHARTS:
        chart = state.charts.get(name)
        if chart is None:
            problems.append(f"chart {name} is missing (charts: {', '.join(state.charts) or 'none'})")
        elif chart.get("data-drawn") != "yes":
            problems.append(f"chart {name} did not draw: its box has no size, holds no canvas or no data "
                            f"(box {chart.get('data-rect')}, {chart.get('data-points')} data points)")
    print(f"page: {state.status.get('data-drawn')} of {state.status.get('data-charts')} charts drawn")
    # Words a person reads: no two texts of a chart on top of each other (the tune scatter's names, the
    # bench's values), and the profile's timeline marks the cold start its header gives, not "ready"
    # (which comes after the steady runs the profile times).
    for name, chart in state.charts.items():
        overlaps = int(chart.get("data-label-overlaps", "0"))
        if overlaps and (name == "tune" or name.startswith("bench-")):
            problems.append(f"chart {name}: {overlaps} pair(s) of its texts overlap")
    profile_series = state.charts.get("profile-timeline", {}).get("data-series", "").split("|")
    if "ready" in profile_series or "end of the first inference (the cold start)" not in profile_series:
        problems.append(f"the profile's timeline marks {profile_series}, not the end of the first inference its header names")

    height = min(int(state.status.get("data-page-height", "4000")), 16000)
    screenshot = work / "report.png"
    shot = chromium(browser, work, page, [f"--window-size=1280,{height}", f"--screenshot={screenshot}"])
    if shot.returncode != 0 or not screenshot.exists():
        problems.append(f"chromium --screenshot failed ({shot.returncode}): {shot.stderr[-2000:]}")
    else:
        image = Image.open(screenshot).convert("RGB")
        print(f"screenshot: {screenshot} ({image.size[0]}x{image.size[1]})")
        if distinct_colours(image, (0, 0, image.size[0], image.size[1])) < 2:
            problems.append("the screenshot is blank: one flat colour")
        for name, chart in state.charts.items():
            x, y, width, height = (int(v) for v in chart.get("data-rect", "0,0,0,0").split(","))
            box = (x, y, min(width, image.size[0] - x), min(height, image.size[1] - y))
            if box[2] <= 0 or box[3] <= 0:
                problems.append(f"chart {name} lies outside the screenshot ({chart.get('data-rect')})")
                continue
            colours = distinct_colours(image, box)
            print(f"chart {name}: {width}x{height} px at ({x}, {y}), {colours} colours in the screenshot")
            if colours < 3:
                problems.append(f"chart {name} is blank in the screenshot ({colours} colour(s))")

    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        return 1
    print(f"ok: {page} drew {len(state.charts)} charts in {browser}, with no error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
