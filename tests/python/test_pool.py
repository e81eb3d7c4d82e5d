"""Warm worker pools from Python: ortfleet.Pool, ortfleet.prewarm() and the pool of `ortfleet serve`."""
import os
import subprocess
import time

import numpy as np
import pytest

import ortfleet


def _inputs(fleet):
    spec = fleet.inputs[0]
    shape = [d if d > 0 else 1 for d in spec["shape"]]
    return {spec["name"]: np.random.default_rng(5).standard_normal(shape).astype(np.float32)}


def _outputs_alone(model, inputs):
    with ortfleet.Fleet(model, devices="cpu", strategy="sequential") as alone:
        alone.start().wait()
        return alone.run("cpu", inputs)


def test_a_fleet_on_a_pool_runs_in_its_workers_and_the_same_model_is_resident(models):
    with ortfleet.Pool(devices="cpu*2") as pool:
        assert pool.wait(120)
        with ortfleet.Fleet(models["mlp"], devices="cpu*2", pool=pool) as fleet:
            assert fleet.start().wait(120)
            status = {s["device"]: s for s in fleet.status()}
            # A model new to a fresh pool starts in its shared workers, which hold nobody's session yet
            # (a new model starts on a spare once they do).
            workers = {(d["device"], d["pid"]) for d in pool.status()["devices"] if d["role"] == "shared"}
            assert {(d, s["pid"]) for d, s in status.items()} == workers
            assert not any(s["resident"] for s in status.values())
            inputs = _inputs(fleet)
            want = _outputs_alone(models["mlp"], inputs)
            for device in ("cpu", "cpu:1"):
                got = fleet.run(device, inputs)
                for name in want:
                    np.testing.assert_array_equal(got[name], want[name])
        with ortfleet.Fleet(models["mlp"], devices="cpu*2", pool=pool) as again:
            assert again.start().wait(120)
            assert all(s["resident"] for s in again.status())
        sessions = [s for d in pool.status()["devices"] for s in d["sessions"]]
        assert len(sessions) == 2 and all(s["holders"] == 0 for s in sessions)
        assert pool.evict() == 2


def test_prewarm_returns_at_once_and_later_fleets_use_its_workers(models):
    pool = ortfleet.prewarm(devices="cpu*2")
    try:
        assert pool.wait(120)
        with ortfleet.Fleet(models["mlp"], devices="cpu*2") as fleet:
            assert fleet.start().wait(120)
            workers = sorted(d["pid"] for d in pool.status()["devices"])
            assert set(s["pid"] for s in fleet.status()) <= set(workers)
        # A device the prewarmed pool lacks, or pool=False: a fleet of its own.
        with ortfleet.Fleet(models["mlp"], devices="cpu:2") as other:
            assert other.start().wait(120)
            assert not set(s["pid"] for s in other.status()) & set(workers)
        with ortfleet.Fleet(models["mlp"], devices="cpu*2", pool=False, strategy="processes") as own:
            assert own.start().wait(120)
            assert not set(s["pid"] for s in own.status()) & set(workers)
    finally:
        ortfleet._forget_prewarmed()
        pool.close()


def test_a_fleet_on_the_pool_of_ortfleet_serve(models, tmp_path):
    cli = os.path.join(os.environ.get("ORTFLEET_BUILD_DIR", "build/release"), "bin", "ortfleet")
    if not os.access(cli, os.X_OK):
        pytest.skip(f"no ortfleet executable at {cli} (set ORTFLEET_BUILD_DIR)")
    socket = str(tmp_path / "pool.sock")
    server = subprocess.Popen([cli, "-q", "serve", "--devices", "cpu*2", "--socket", socket])
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(socket) and time.monotonic() < deadline:
            time.sleep(0.05)
        with ortfleet.Fleet(models["mlp"], devices="cpu*2", pool=socket) as first:
            assert first.start().wait(120), first.status()
            inputs = _inputs(first)
            want = _outputs_alone(models["mlp"], inputs)
            np.testing.assert_array_equal(first.run("cpu:1", inputs)[first.outputs[0]["name"]], want[first.outputs[0]["name"]])
        with ortfleet.Fleet(models["mlp"], devices="cpu*2", pool=socket) as second:
            assert second.start().wait(120)
            assert all(s["resident"] for s in second.status())
    finally:
        server.terminate()
        assert server.wait(60) == 0
    assert not os.path.exists(socket)


def test_pool_misuse_is_one_clear_error(models, tmp_path):
    with pytest.raises(ortfleet.Error, match="pool=True is not a pool"):
        ortfleet.Fleet(models["mlp"], devices="cpu", pool=True)
    with ortfleet.Fleet(models["mlp"], devices="cpu", pool=str(tmp_path / "none.sock")) as fleet:
        assert not fleet.start().wait(60)
        assert "no warm pool runs on" in fleet.status()[0]["error"]


def test_a_first_start_leaves_a_warm_pool_and_the_next_job_finds_its_model_resident(models, tmp_path, monkeypatch):
    # As a Python job meets it on a node with no `ortfleet serve`: its own runtime folder and cache.
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.setenv("ORTFLEET_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ORTFLEET_AUTO_POOL", raising=False)
    socket = ortfleet.default_pool_socket()
    assert socket.startswith(str(run))
    try:
        with ortfleet.Fleet(models["mlp"], devices="cpu", warm_pool_idle=120) as first:
            assert first.start().wait(120)
            assert first.status()[0]["model_cache"] == "miss"
            first.wait_for_cache_fill(0)  # every note of what the start left is in
            assert any("left a warm pool" in note for note in first.left_behind()), first.left_behind()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                status = ortfleet.pool_status()
                if any(s["model"].endswith("mlp.onnx") for d in status["devices"] for s in d["sessions"]):
                    break
            except ortfleet.Error:
                pass
            time.sleep(0.1)
        else:
            pytest.fail("the pool left behind never held the model")
        assert status["idle_exit_s"] == 120
        with ortfleet.Fleet(models["mlp"], devices="cpu") as second:
            assert second.start().wait(120)
            assert second.status()[0]["resident"]
            assert second.left_behind() == []
    finally:
        try:
            ortfleet.pool_stop()
        except ortfleet.Error:
            pass
    assert not os.path.exists(socket)


def test_pool_false_neither_uses_nor_leaves_a_pool(models, tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.delenv("ORTFLEET_AUTO_POOL", raising=False)
    with ortfleet.Fleet(models["mlp"], devices="cpu", pool=False, model_cache_fill="off") as fleet:
        assert fleet.start().wait(120)
        assert fleet.wait_for_cache_fill(0) is None
        assert fleet.left_behind() == []
    assert not os.path.exists(ortfleet.default_pool_socket())
    with pytest.raises(ortfleet.Error, match="model_cache_fill=sometimes is not one of background, inline, off"):
        ortfleet.Fleet(models["mlp"], devices="cpu", model_cache_fill="sometimes")
