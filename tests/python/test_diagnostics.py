"""doctor, bench, profile and tune from Python return what the command line prints with --json."""
import json
import subprocess
import sys

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
    tune = ortfleet.tune(models["mlp"], device="cpu", quick=True, runs=3)
    assert tune["start_fast"] is not None and tune["serve_fast"] is not None


def test_a_config_from_python_reaches_the_timed_child_starts(models):
    # A custom-op library that is not there: each child start that gets this config fails, and says so;
    # a child that started on defaults would be ready. (What the model itself contradicts, such as a
    # range for an input it lacks, is refused before any child: test_settings_checked.py.)
    config = {"session": {"custom_op_libraries": ["/nonexistent/libno_such_ops.so"]}}
    bench = ortfleet.bench(models["mlp"], devices="cpu", runs=1, warmup=0, anchors=False, config=config)
    started = [r for r in bench["rows"] if r["family"] == "ortfleet"]
    assert started and all("libno_such_ops.so" in r["error"] for r in started), [r["error"] for r in started]
    with pytest.raises(Exception, match="libno_such_ops.so"):
        ortfleet.profile(models["mlp"], device="cpu", runs=1, config=config)
    tune = ortfleet.tune(models["mlp"], device="cpu", quick=True, runs=1, config=config)
    assert tune["results"] and all("libno_such_ops.so" in r["error"] for r in tune["results"]), [r["error"] for r in tune["results"]]


def test_synth_nodes_writes_the_node_heavy_graph(tmp_path):
    path = ortfleet.synth_nodes(str(tmp_path / "nodes.onnx"), nodes=900, width=8)
    with ortfleet.Fleet(path, devices="cpu", strategy="sequential") as fleet:
        assert fleet.start().wait()
        (value,) = fleet.run("cpu", {"input": np.ones((1, 8), np.float32)}).values()
        assert value.shape == (1, 8) and np.isfinite(value).all()
