#!/usr/bin/env python3
"""tables.py ORTFLEET MODEL WORK: the tables of bench, tune, profile, `cache export` and `pool status`
as a pipe gets them (stdout to a file): every row on one line of at most 100 characters (as many table
lines as the command's --json has rows: a wrapped row would add lines), no name split; every ratio
bench and tune print recomputes from the means of the table it stands under, within rounding, and is
written with two decimals."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

WIDTH = 100
failures = []


def fail(what):
    failures.append(what)
    print("FAILED: " + what)


def run(*args, env=None, timeout=900):
    done = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        fail(f"{' '.join(args)} exited with {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def tables(text):
    """Each table of `text`: its header, its rule's column spans, and its row lines (up to a blank line)."""
    lines = text.splitlines()
    found = []
    for i in range(1, len(lines)):
        rule = lines[i]
        if not rule or set(rule) - {"-", " "} or not rule.startswith("-"):
            continue
        spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]
        rows = []
        for line in lines[i + 1:]:
            if not line.strip():
                break
            rows.append(line)
        found.append({"header": lines[i - 1], "rule": rule, "spans": spans, "rows": rows})
    return found


def cells(row, spans):
    """The row's cells by the rule's column spans (a right-aligned cell ends where its column does)."""
    out = []
    for k, (start, end) in enumerate(spans):
        stop = spans[k + 1][0] if k + 1 < len(spans) else len(row)
        out.append(row[start:max(end, stop)].strip())
    return out


def check_table(name, table, rows_expected, width=WIDTH):
    for line in [table["header"], table["rule"]] + table["rows"]:
        if width and len(line) > width:
            fail(f"{name}: a line of {len(line)} characters, wider than {WIDTH}:\n{line}")
    if len(table["rows"]) != rows_expected:
        fail(f"{name}: {len(table['rows'])} table lines for {rows_expected} rows (a row wrapped onto more lines?):\n"
             + "\n".join([table["header"], table["rule"]] + table["rows"]))


def ms(text):
    """'503 ms', '1.23 s', '85.0 us', or a mean ± σ: the first time, in ms."""
    m = re.match(r"([\d.]+) (us|ms|s)\b", text)
    if not m:
        m = re.match(r"(\d+) min (\d+) s", text)
        return (int(m.group(1)) * 60 + int(m.group(2))) * 1000.0
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1000.0}[m.group(2)]


def expect_ratio(where, printed, numerator, denominator):
    """A ratio printed to two decimals (or two significant digits) from times printed to three."""
    ratio = numerator / denominator
    if abs(printed - ratio) > 0.006 + 0.012 * ratio:
        fail(f"{where}: prints {printed}x, the table's means give {numerator:g} / {denominator:g} = {ratio:.3f}x")


RATIO = r"(\d+\.\d+)(?: ± \d+\.\d+)?x"


def check_ratio_format(name, text):
    """One ratio format in all that is printed: two decimals ("1.00x", never "1x" beside "1.01x")."""
    for m in re.finditer(r"(?<![\w.])(\d+(?:\.\d+)?)x\b", text):
        if not re.fullmatch(r"\d+\.\d\d", m.group(1)):
            line = next(l for l in text.splitlines() if m.group(0) in l)
            fail(f"{name}: the ratio {m.group(0)} is not written with two decimals: {line}")


def first_table(name, text, rows_expected):
    """The first table of `text`, checked (check_table), with its rows as dicts by header; None when none."""
    found = tables(text)
    if not found:
        fail(f"{name} printed no table:\n" + text)
        return None
    table = found[0]
    check_table(name, table, rows_expected)
    header = cells(table["header"], table["spans"])
    table["cells"] = [dict(zip(header, cells(line, table["spans"]))) for line in table["rows"]]
    return table


def check_bench(cli, model, work, env):
    exported = os.path.join(work, "bench.json")
    text = run(cli, "bench", model, "--devices", "cpu*2", "--runs", "3", "--no-anchors", "--export-json", exported, env=env)
    result = json.load(open(exported))
    check_ratio_format("bench", text)
    table = first_table("bench", text, len(result["rows"]))
    if table is None:
        return
    rows = {c["start-up"]: c for c in table["cells"]}
    means = {label: ms(r["mean ± σ"]) for label, r in rows.items() if r.get("mean ± σ") not in (None, "", "failed")}
    checked = 0
    for r in result["rows"]:
        ratio = rows.get(r["label"], {}).get("vs 1 device", "")
        if ratio and r["baseline"]:
            expect_ratio(f"bench row {r['label']}, vs 1 device", float(ratio.rstrip("x")), means[r["label"]], means[r["baseline"]])
            checked += 1
    if not checked:
        fail("bench: no 'vs 1 device' ratio to check")
    # The verdict: each comparison's ratio is the row's mean over the fastest's.
    fastest = result["fastest"]
    for line in result["comparisons"]:
        m = re.search(RATIO, line)
        label = next((l for l in sorted(means, key=len, reverse=True) if f" {l} (" in line), None)
        if m and label:
            expect_ratio(f"bench verdict '{line}'", float(m.group(1)), means[label], means[fastest])
        else:
            fail(f"bench verdict line without a ratio and a row: {line}")
    # The notes: a ratio with the two times it is of, "(A vs B)", and the ratios to one device.
    for note in result["notes"]:
        for m in re.finditer(r"(\d+\.\d+)x [^()]*\((\S+ (?:us|ms|s)) vs (\S+ (?:us|ms|s))\)", note):
            expect_ratio(f"bench note '{note}'", float(m.group(1)), ms(m.group(2)), ms(m.group(3)))
        m = re.match(r"(.+) on \d+ devices / (.+): (\d+\.\d+)x \(the table's means\)", note)
        if m:
            expect_ratio(f"bench note '{note}'", float(m.group(3)), means[m.group(1)], means[m.group(2)])


def check_tune(cli, model, work, env):
    exported = os.path.join(work, "tune.json")
    text = run(cli, "tune", model, "--devices", "cpu", "--quick", "--repeat", "2", "--runs", "5", "--export-json", exported, env=env)
    result = json.load(open(exported))
    check_ratio_format("tune", text)
    table = first_table("tune", text, len(result["results"]))
    if table is None:
        return
    ready = {c["configuration"]: ms(c["ready"]) for c in table["cells"] if c.get("ready") and c["ready"] != "failed"}
    first = result["results"][0]["name"]
    for key in ("start_verdict",):
        m = re.match(r"(.+?): ready time .*?, " + RATIO + " the first configuration's", result[key])
        if m:
            expect_ratio(f"tune {key} '{result[key]}'", float(m.group(2)), ready[m.group(1)], ready[first])


def check_profile(cli, model, env):
    text = run(cli, "profile", model, "--devices", "cpu", "--runs", "3", "--shape-switch-seconds", "0", env=env)
    phases = json.loads(run(cli, "-q", "profile", model, "--devices", "cpu", "--runs", "3", "--shape-switch-seconds", "0", "--json", env=env))
    found = tables(text)
    if not found:
        return fail("profile printed no table:\n" + text)
    check_table("profile", found[0], len(phases["phases"]) + 1)  # and "(unattributed)"
    for t in found[1:]:
        check_table("profile (" + t["header"].split()[0] + ")", t, len(t["rows"]))


def check_cache_export(cli, model, work, env):
    run(cli, "-q", "start", model, "--devices", "cpu", "--model-cache-fill", "inline", env=env)
    text = run(cli, "cache", "export", model, "--out", os.path.join(work, "text.ortfleet"), env=env)
    bundle = json.loads(run(cli, "cache", "export", model, "--out", os.path.join(work, "json.ortfleet"), "--json", env=env))
    found = tables(text)
    if not found:
        return fail("cache export printed no table:\n" + text)
    check_table("cache export", found[0], len(bundle["entries"]))
    entry = bundle["entries"][0]["entry"]
    if entry and not any(entry in row for row in found[0]["rows"]):
        fail(f"cache export: the entry's name {entry} is not whole on one line:\n" + "\n".join(found[0]["rows"]))


def check_pool_status(cli, model, work, env):
    socket = os.path.join(work, "pool.sock")
    server = subprocess.Popen([cli, "serve", "--devices", "cpu*2", "--socket", socket], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = subprocess.run([cli, "-q", "pool", "status", "--socket", socket, "--json"], capture_output=True, text=True, env=env)
            if status.returncode == 0 and '"state": "starting"' not in status.stdout:
                break
            time.sleep(0.2)
        # A model where users keep theirs, deep in a project: its whole path is wider than a table row may be.
        deep = os.path.join(work, "a-project-of-the-users-with-a-long-name", "exported-models", "2026-11-28-release-candidate")
        os.makedirs(deep, exist_ok=True)
        model = shutil.copy(model, os.path.join(deep, os.path.basename(model)))
        if len(model) <= WIDTH:
            return fail(f"the deep model path is only {len(model)} characters: the test proves nothing")
        run(cli, "-q", "start", model, "--devices", "cpu*2", "--pool", socket, env=env)
        # The same model with another setting: two sessions that look alike but for what tells them apart.
        run(cli, "-q", "start", model, "--devices", "cpu*2", "--pool", socket, "--intra-threads", "1", env=env)
        text = run(cli, "pool", "status", "--socket", socket, env=env)
        status = json.loads(run(cli, "pool", "status", "--socket", socket, "--json", env=env))
        found = tables(text)
        if not found:
            return fail("pool status printed no table:\n" + text)
        check_table("pool status (workers)", found[0], len(status["devices"]))
        if len(found) < 2:
            return fail("pool status printed no table of resident sessions:\n" + text)
        # The sessions' model column names each model by its file name; its whole path is said under the table.
        check_table("pool status (sessions)", found[1], sum(len(d["sessions"]) for d in status["devices"]))
        if f": {model}" not in text:
            fail(f"pool status does not say the model's whole path ({model}):\n" + text)
        # Each row says what the pool knows of it: its own memory ("-" where the pool cannot know it), and
        # the settings that tell it from the other sessions of its model, whatever the table's width.
        header = cells(found[1]["header"], found[1]["spans"])
        if "own memory" not in header or "memory at ready" in header:
            fail(f"pool status's sessions table has no 'own memory' column, or the worker's memory at ready: {header}")
        rows = [s for d in status["devices"] for s in d["sessions"]]
        for session, line in zip(rows, found[1]["rows"]):
            own = session.get("own_memory")
            if not own and " - " not in line + " ":
                fail(f"pool status shows a session's own memory the pool does not know: {line}")
            for setting, value in (session.get("differs_by") or {}).items():
                name = setting[len("config."):] if setting.startswith("config.") else setting
                if f"{name}=" not in text:
                    fail(f"pool status does not say what tells a session apart ({name}):\n" + text)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


def main():
    cli, source_model, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # A file name as long as users' are (the cache export split "myfcn-542ecd6dfd5f7cb3.onnx"'s
    # entry): a table keeps it whole.
    model = os.path.join(work, "segmenter-fcn-542ecd6dfd5f7cb3.onnx")
    shutil.copy(source_model, model)
    env = dict(os.environ, ORTFLEET_CACHE=os.path.join(work, "cache"), ORTFLEET_AUTO_POOL="0")
    check_bench(cli, model, work, env)
    check_tune(cli, model, work, env)
    check_profile(cli, model, env)
    check_cache_export(cli, model, work, env)
    check_pool_status(cli, model, work, env)
    if failures:
        sys.exit(1)
    print("ok: the tables of bench, tune, profile, cache export and pool status keep each row on one line within "
          f"{WIDTH} columns, and bench's and tune's ratios recompute from their tables")


if __name__ == "__main__":
    main()
