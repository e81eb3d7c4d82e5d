"""doctor, bench, profile and tune from Python return what the command line prints with --json."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import numpy as np
import ortfleet


def cli_json(*args):
    out = subprocess.run([sys.executable, "-m", "ortfleet", *args, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_doctor_matches_the_command_line():
    from_python = ortfleet.doctor()
    from_cli = cli_json("doctor")
    assert from_python.keys() == from_cli.keys()
    assert from_python["runtime"]["path"] == from_cli["runtime"]["path"]
    assert [f["check"] for f in from_python["findings"]] == [f["check"] for f in from_cli["findings"]]


def test_bench_profile_tune(models):
    bench = ortfleet.bench(models["mlp"], devices="cpu*2", runs=1, warmup=0, anchors=False)
    assert bench["ortfleet_bench"] == 1
    assert {r["label"] for r in bench["rows"]} >= {"sequential", "threads", "processes", "fleet", "fleet (1 device)"}
    assert all(not r["error"] for r in bench["rows"])
    profile = ortfleet.profile(models["resnet18"], device="cpu", runs=3)
    assert profile["attributed_share"] >= 0.9
    # The floor of the start, term by term, and the start's ratio to it.
    assert [t["name"] for t in profile["floor"]["terms"]] == ["process", "runtime", "session", "inference"]
    assert profile["floor_ms"] > 0 and profile["floor_ratio"] > 0
    tune = ortfleet.tune(models["mlp"], device="cpu", quick=True, runs=3, rounds=2)
    assert tune["rounds"] == 2 and all(len(r["ready_ms"]) == 2 for r in tune["results"])
    # A recommendation only for a gain beyond noise; otherwise the verdict says there is none.
    for goal in ("start", "serve"):
        assert tune[goal + "_verdict"]
        assert tune[goal + "_fast"] is not None or tune[goal + "_verdict"].startswith("none"), tune[goal + "_verdict"]


def test_a_config_from_python_reaches_the_timed_child_starts(models, tmp_path):
    # A custom-op library whole on disk whose registration fails (tests/support/refusing_ops.cpp): the
    # check before any child passes it (a damaged one it refuses: test_settings_checked.py), so each
    # child start that gets this config fails loading it, and says so; one started on defaults would be ready.
    broken = tmp_path / "libno_such_ops.so"
    broken.write_bytes((pathlib.Path(os.environ.get("ORTFLEET_BUILD_DIR", "build/release")) / "bin" / "libortfleet_test_refusing_ops.so").read_bytes())
    config = {"session": {"custom_op_libraries": [str(broken)]}}
    bench = ortfleet.bench(models["mlp"], devices="cpu", runs=1, warmup=0, anchors=False, config=config)
    started = [r for r in bench["rows"] if r["family"] == "ortfleet"]
    assert started and all("libno_such_ops.so" in r["error"] for r in started), [r["error"] for r in started]
    with pytest.raises(Exception, match="libno_such_ops.so"):
        ortfleet.profile(models["mlp"], device="cpu", runs=1, config=config)
    tune = ortfleet.tune(models["mlp"], device="cpu", quick=True, runs=2, rounds=1, config=config)
    assert tune["results"] and all("libno_such_ops.so" in r["error"] for r in tune["results"]), [r["error"] for r in tune["results"]]


# Each number takes what the command line's flag takes (the rules beside the options, BenchOptions::kRunsRule
# ...), refused in one line naming the keyword before any child process: they were taken unchecked
# (issue 58's re-audit, S1), and bench(runs=0) named the flag, --runs.
@pytest.mark.parametrize("call, said", [
    (lambda m: ortfleet.profile(m, device="cpu", runs=-1), "runs=-1 is out of range: give a whole number from 1 to 9999"),
    (lambda m: ortfleet.profile(m, device="cpu", runs=0), "runs=0 is out of range: give a whole number from 1 to 9999"),
    (lambda m: ortfleet.profile(m, device="cpu", runs=True), "runs takes a whole number from 1 to 9999, not True"),
    (lambda m: ortfleet.bench(m, devices="cpu", runs=0), "runs=0 is out of range: give a whole number from 1 to 1000"),
    (lambda m: ortfleet.bench(m, devices="cpu", warmup=-1), "warmup=-1 is out of range: give a whole number from 0 to 100"),
    (lambda m: ortfleet.bench(m, devices="cpu", budget=float("nan")), "budget=nan is out of range: give a number of seconds from 0 to 604800"),
    (lambda m: ortfleet.bench(m, devices="cpu", budget=float("inf")), "budget=inf is out of range"),
    (lambda m: ortfleet.bench(m, devices="cpu", budget=-1), "budget=-1 is out of range"),
    (lambda m: ortfleet.bench(m, devices="cpu", budget=False), "budget takes a number of seconds from 0 to 604800, not False"),
    (lambda m: ortfleet.tune(m, device="cpu", budget=float("nan")), "budget=nan is out of range"),
    (lambda m: ortfleet.tune(m, device="cpu", runs=-1), "runs=-1 is out of range: give a whole number from 2 to 100000"),
    (lambda m: ortfleet.tune(m, device="cpu", runs=1), "runs=1 is out of range: give a whole number from 2 to 100000"),
    (lambda m: ortfleet.tune(m, device="cpu", rounds=0), "rounds=0 is out of range: give a whole number from 1 to 100"),
    (lambda m: ortfleet.tune(m, device="cpu", rounds=10**400), "rounds=inf is out of range"),
])
def test_numbers_out_of_range_are_refused_naming_the_keyword(models, call, said):
    with pytest.raises(ortfleet.Error) as refused:
        call(models["mlp"])
    text = str(refused.value)
    assert text.startswith(said) and "\n" not in text and "--" not in text, text


def test_synth_nodes_writes_the_node_heavy_graph(tmp_path):
    path = ortfleet.synth_nodes(str(tmp_path / "nodes.onnx"), nodes=900, width=8)
    with ortfleet.Fleet(path, devices="cpu", strategy="sequential") as fleet:
        assert fleet.start().wait()
        (value,) = fleet.run("cpu", {"input": np.ones((1, 8), np.float32)}).values()
        assert value.shape == (1, 8) and np.isfinite(value).all()


def test_bench_runs_the_anchors_with_this_interpreter_not_python3_from_path(models, tmp_path, run_script, python_exe):
    # A `python3` first on PATH that is not this interpreter: the bench must not run it.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    ran = tmp_path / "fake-python3-ran"
    fake = fake_bin / "python3"
    fake.write_text(f"#!/bin/sh\ntouch {ran}\nexit 1\n")
    fake.chmod(0o755)
    code = f"""
import json, ortfleet
r = ortfleet.bench({models["mlp"]!r}, devices="cpu", runs=1, warmup=0, anchors=True, progress=False)
print(json.dumps({{"skipped": r["skipped"], "families": sorted({{row["family"] for row in r["rows"]}})}}))
"""
    rc, out, err = run_script(code, env={"PATH": f"{fake_bin}:{os.environ['PATH']}"})
    assert rc == 0, err
    assert not ran.exists(), "the bench ran python3 from PATH, not the interpreter it runs in"
    said = json.loads(out.strip().splitlines()[-1])
    anchors = [s for s in said["skipped"] if s.startswith("onnxruntime Python anchors")]
    # Either the anchors ran (this interpreter has onnxruntime), or the line names this interpreter and
    # says how to get what it lacks.
    assert "onnxruntime-python" in said["families"] or (anchors and python_exe in anchors[0] and "pip install onnxruntime" in anchors[0]), said


def test_progress_reaches_python_as_it_comes(models):
    lines = []
    ortfleet.profile(models["mlp"], device="cpu", runs=1, progress=lines.append)
    assert any(line.startswith("profiling one cold start of ") for line in lines), lines
    lines.clear()
    ortfleet.tune(models["mlp"], device="cpu", quick=True, runs=2, rounds=1, progress=lines.append)
    assert any("untimed start" in line for line in lines) and any(line.startswith("round 1/1:") for line in lines), lines
    with pytest.raises(TypeError, match="progress= takes None"):
        ortfleet.profile(models["mlp"], device="cpu", progress="loud")


def _processes_with(marker):
    """Pids of this user's processes whose environment carries `marker`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker.encode() in f.read():
                    with open(f"/proc/{pid}/stat") as stat:
                        if stat.read().split(")")[-1].split()[0] != "Z":
                            found.append(int(pid))
        except OSError:
            pass
    return found


def test_ctrl_c_stops_the_bench_in_order_and_leaves_nothing(models, tmp_path, python_exe):
    """Ctrl-C at a terminal goes to the whole foreground group: the bench must answer it at once, stop
    the start under way and what it set up (its pool, its folders), and leave nothing running."""
    marker = f"ORTFLEET_TEST_MARK=ctrl-c-{os.getpid()}"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = f"""
import signal, sys, time, ortfleet
signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal
def said(line):
    if line.startswith("round 1/") and not said.told:
        said.told = True
        print("running", flush=True)
said.told = False
try:
    ortfleet.bench({models["mlp"]!r}, devices="cpu*2", runs=50, warmup=0, anchors=False, progress=said)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
    raise
"""
    env = dict(os.environ, TMPDIR=str(tmp))
    env[marker.split("=")[0]] = marker.split("=")[1]
    job = subprocess.Popen([python_exe, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                           start_new_session=True)  # a group of its own, as a terminal's foreground job
    try:
        assert job.stdout.readline().strip() == "running", job.stderr.read()
        time.sleep(1.0)  # inside a round's start
        sent = time.monotonic()
        os.killpg(job.pid, signal.SIGINT)  # what Ctrl-C does
        line = job.stdout.readline().split()
        assert line[:1] == ["interrupted"], (line, job.stderr.read())
        assert float(line[1]) - sent < 15, f"the bench took {float(line[1]) - sent:.1f} s to stop"
        rc = job.wait(timeout=30)
    finally:
        if job.poll() is None:
            job.kill()
    stderr = job.stderr.read()
    assert rc != 0 and "KeyboardInterrupt" in stderr, stderr
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_with(marker), "the bench left processes running"
    assert not [p.name for p in tmp.iterdir() if p.name.startswith("ortfleet")], "the bench left its folders"


def test_a_script_that_exits_while_a_daemon_thread_runs_the_bench_stops_it_in_order(models, tmp_path, python_exe):
    """The interpreter's exit stops a bench a daemon thread waits for, as Ctrl-C does. It aborted
    ("terminate called without an active exception": its thread destroyed while joinable as Python ended
    the daemon thread) and left the start under way, its worker and the bench's folders (issue 58's audit)."""
    marker = f"ORTFLEET_TEST_MARK=exit-{os.getpid()}"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = f"""
import threading, ortfleet
running = threading.Event()
def said(line):
    if line.startswith("round 1/"):
        running.set()
def bench():
    ortfleet.bench({models["mlp"]!r}, devices="cpu", runs=50, warmup=0, anchors=False, progress=said)
threading.Thread(target=bench, daemon=True).start()
assert running.wait(120)
print("leaving", flush=True)
"""
    env = dict(os.environ, TMPDIR=str(tmp))
    env[marker.split("=")[0]] = marker.split("=")[1]
    done = subprocess.run([python_exe, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert "leaving" in done.stdout, done.stderr
    assert "terminate called" not in done.stderr and done.returncode == 0, done.stderr
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_with(marker), "the bench left processes running"
    assert not [p.name for p in tmp.iterdir() if p.name.startswith("ortfleet")], "the bench left its folders"
