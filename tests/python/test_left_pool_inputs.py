"""The warm pool a job leaves makes the model's cache entry after the job ended, from what it owns: a
Python job with array warmup_inputs (a temporary .npz removed with its fleet) left a pool whose fill
failed on the deleted file, and the entry was never made (issue 50). Every path-valued setting of the
job is gone here when the pool works: the warm-up arrays, the config file, a custom-op library, the
profile folder."""
import json
import os
import pathlib
import shutil
import time

import pytest

import ortfleet

BIN = pathlib.Path(os.environ.get("ORTFLEET_BUILD_DIR", "build/release")) / "bin"

JOB = """
import numpy as np, ortfleet
inputs = {{"input": np.random.default_rng(3).standard_normal((1, 64)).astype(np.float32)}}
with ortfleet.Fleet({model!r}, devices="cpu", config={config!r}, warmup_inputs=inputs, profile_dir={profiles!r},
                    warm_pool_idle=120) as fleet:
    assert fleet.start().wait(120), fleet.status()
    assert fleet.status()[0]["model_cache"] == "miss", fleet.status()
    fleet.wait_for_cache_fill(0)
    print("LEFT", fleet.left_behind())
"""


def sealed_entries(cache):
    folder = cache / "models"
    return sorted(p.name for p in folder.glob("*.manifest.json")) if folder.exists() else []


def test_the_pool_a_job_left_makes_the_entry_after_the_jobs_files_are_gone(models, run_script, tmp_path, monkeypatch):
    ops = BIN / "libortfleet_test_crash_ops.so"
    if not ops.exists():
        pytest.fail(f"{ops} is not built: build the tests first (cmake --build --preset release --target ortfleet_all_tests)")
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    cache = tmp_path / "cache"
    job = tmp_path / "job"
    (job / "profiles").mkdir(parents=True)
    shutil.copy(ops, job / "libops.so")
    config = job / "config.json"
    # graph_optimization changes the entry's key: the entry made must be the config's.
    config.write_text(json.dumps({"ortfleet_config": 1,
                                  "session": {"graph_optimization": "basic", "custom_op_libraries": [str(job / "libops.so")]}}))
    socket = str(run / "ortfleet" / "pool.sock")
    env = {"XDG_RUNTIME_DIR": str(run), "ORTFLEET_CACHE": str(cache), "ORTFLEET_AUTO_POOL": None,
           # Every worker, the pool's fill too, waits 3 s before its start: the job is gone by then.
           "ORTFLEET_TEST_WORKER_START_DELAY": "cpu=3"}
    try:
        rc, out, err = run_script(JOB.format(model=models["mlp"], config=str(config), profiles=str(job / "profiles")), env=env)
        assert rc == 0, out + err
        assert "left a warm pool" in out and "makes the model's cache entry" in out, out
        shutil.rmtree(job)  # the job's own files go with it
        deadline = time.monotonic() + 120
        while not sealed_entries(cache) and time.monotonic() < deadline:
            time.sleep(0.2)
        log = pathlib.Path(socket + ".log").read_text()
        assert sealed_entries(cache), "the pool made no entry; its log:\n" + log
        assert "was not made" not in log, log
        assert not job.exists(), "the pool made the job's folder again (its profile folder?)"
    finally:
        if os.path.exists(socket):
            ortfleet.pool_stop(socket)
    # The entry is the config's: a start with the same settings, without a pool, finds it.
    monkeypatch.setenv("ORTFLEET_CACHE", str(cache))
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="fleet", pool=False,
                        config={"session": {"graph_optimization": "basic"}}) as again:
        assert again.start().wait(120), again.status()
        assert again.status()[0]["model_cache"] in ("hit", "no-gain"), again.status()
