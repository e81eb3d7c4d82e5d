"""The Python API: a fleet started and used from Python, errors as exceptions."""
import subprocess
import sys

import numpy as np
import pytest

import ortfleet

SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}


def test_runtime_is_found_and_reported():
    rt = ortfleet.load_runtime()
    major, minor = (int(x) for x in rt["version"].split(".")[:2])
    assert (major, minor) >= (1, 29)
    assert "CPUExecutionProvider" in rt["providers"]


@pytest.mark.parametrize("strategy", ["sequential", "threads", "processes", "fleet"])
def test_fleet_starts_every_device_and_runs_numpy(models, strategy):
    with ortfleet.Fleet(models["mlp"], devices="cpu*2", strategy=strategy, config=SLIM) as fleet:
        assert fleet.start() is fleet  # start() returns at once; chaining reads naturally
        assert fleet.wait()
        assert fleet.devices == ["cpu", "cpu:1"]
        assert [s["state"] for s in fleet.status()] == ["ready", "ready"]
        assert fleet.inputs == [{"name": "input", "type": "float32", "shape": [1, 64]}]
        x = np.random.default_rng(0).uniform(-1, 1, (1, 64)).astype(np.float32)
        a = fleet.run("cpu", {"input": x})
        b = fleet.run("cpu:1", {"input": x})
        (name, out), = a.items()
        assert out.shape == (1, 64) and out.dtype == np.float32
        np.testing.assert_array_equal(out, b[name])
        assert np.isfinite(out).all()


def test_constructors_take_keywords_past_the_model_and_the_devices(models):
    with pytest.raises(TypeError):
        ortfleet.Fleet(models["mlp"], "cpu", "sequential")
    with pytest.raises(TypeError):
        ortfleet.Pool("cpu", "")


def test_outputs_are_independent_of_later_runs(models):
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="threads", config=SLIM) as fleet:
        fleet.start().wait()
        rng = np.random.default_rng(1)
        first = fleet.run("cpu", {"input": rng.uniform(-1, 1, (1, 64)).astype(np.float32)})
        kept = next(iter(first.values())).copy()
        fleet.run("cpu", {"input": rng.uniform(-1, 1, (1, 64)).astype(np.float32)})
        np.testing.assert_array_equal(next(iter(first.values())), kept)


def test_dlpack_inputs_are_read_like_numpy(models):
    class HostTensor:  # what torch or CuPy hand over: an object with __dlpack__
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, stream=None):
            return self.array.__dlpack__()

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    x = np.random.default_rng(2).uniform(-1, 1, (1, 64)).astype(np.float32)
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="sequential", config=SLIM) as fleet:
        fleet.start().wait()
        via_numpy = fleet.run("cpu", {"input": x})
        via_dlpack = fleet.run("cpu", {"input": HostTensor(x)})
        for k in via_numpy:
            np.testing.assert_array_equal(via_numpy[k], via_dlpack[k])


def test_non_contiguous_and_python_lists_are_accepted(models):
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="sequential", config=SLIM) as fleet:
        fleet.start().wait()
        x = np.random.default_rng(3).uniform(-1, 1, (1, 128)).astype(np.float32)[:, ::2]  # a strided view
        assert not x.flags["C_CONTIGUOUS"]
        a = fleet.run("cpu", {"input": x})
        b = fleet.run("cpu", {"input": x.tolist()})
        for k in a:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-6)


def test_errors_are_ortfleet_errors_with_the_fix(models, tmp_path):
    with pytest.raises(ortfleet.Error, match="does not exist"):
        ortfleet.Fleet(str(tmp_path / "missing.onnx"), devices="cpu")
    text = tmp_path / "notes.onnx"
    text.write_text("not a model\n")
    with pytest.raises(ortfleet.Error, match="is not an ONNX model"):
        ortfleet.Fleet(str(text), devices="cpu")
    with pytest.raises(ortfleet.Error, match="no GPU cuda:"):
        ortfleet.Fleet(models["mlp"], devices=[99])
    with pytest.raises(ortfleet.Error, match="'cuda.conv_algo_search' must be one of"):
        ortfleet.Fleet(models["mlp"], devices="cpu", config={"cuda": {"conv_algo_search": "FASTEST"}})
    with pytest.raises(ortfleet.Error, match="strategy=fastest is not one of sequential, threads, processes, fleet, auto"):
        ortfleet.Fleet(models["mlp"], devices="cpu", strategy="fastest")
    assert issubclass(ortfleet.Error, RuntimeError)


def test_a_dead_worker_is_reported_and_the_others_keep_working(models):
    import os
    import signal

    x = {"input": np.zeros((1, 64), np.float32)}
    with ortfleet.Fleet(models["mlp"], devices="cpu*2", strategy="processes", config=SLIM) as fleet:
        fleet.start().wait()
        victim = fleet.status()[0]
        assert victim["pid"] != os.getpid()
        os.kill(victim["pid"], signal.SIGKILL)
        with pytest.raises(ortfleet.Error, match="killed by signal SIGKILL"):
            fleet.run("cpu", x)
        fleet.run("cpu:1", x)


def test_transfer_counters_count_what_crossed_to_the_workers(models):
    x = {"input": np.ones((1, 64), np.float32)}
    with ortfleet.Fleet(models["mlp"], devices="cpu*2", strategy="processes", config=SLIM) as fleet:
        fleet.start().wait()
        assert fleet.transfer_counters()["inputs_host_bytes"] == 0
        out = fleet.run("cpu:1", x, outputs_on_device=True)  # no GPU to leave them on: host arrays
        fleet.run("cpu", x)
        counters = fleet.transfer_counters()
        assert counters["inputs_host_bytes"] == 2 * x["input"].nbytes
        assert counters["outputs_host_bytes"] == 2 * sum(o.nbytes for o in out.values())
        assert counters["inputs_ipc_bytes"] == counters["outputs_ipc_bytes"] == counters["ipc_opens"] == 0
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="threads", config=SLIM) as fleet:
        fleet.start().wait()
        fleet.run("cpu", x)
        assert not any(fleet.transfer_counters().values())  # nothing crossed: the session is in this process


def test_timeline_and_trace(models):
    import json

    with ortfleet.Fleet(models["mlp"], devices="cpu*2", strategy="fleet", config=SLIM) as fleet:
        fleet.start().wait()
        names = {(e["lane"], e["name"]) for e in fleet.timeline()["events"]}
        assert ("cpu", "session.create") in names and ("cpu:1", "warmup") in names
        assert any(e["ph"] == "X" for e in json.loads(fleet.trace())["traceEvents"])


def test_importing_ortfleet_makes_libstdcxx_global():
    # ONNX Runtime 1.29's CreateEnv crashed in a fresh Python process that had imported only ortfleet,
    # because libstdc++ was not global when the extension loaded (see ortfleet/__init__.py).
    probe = (
        "import ctypes\n"
        "scope = ctypes.CDLL(None)  # dlopen(NULL): the global symbol scope\n"
        "def is_global(): return hasattr(scope, '_ZNSt6locale7classicEv')\n"
        "before = is_global()\n"
        "import ortfleet\n"
        "print(before, is_global())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    assert out[1] == "True", f"libstdc++ is not global after 'import ortfleet' (before: {out[0]})"


def test_read_only_arrays_are_accepted(models):
    x = np.random.default_rng(4).uniform(-1, 1, (1, 64)).astype(np.float32)
    frozen = x.copy()
    frozen.setflags(write=False)  # e.g. an array over a read-only buffer or a memory map
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="sequential", config=SLIM) as fleet:
        fleet.start().wait()
        a = fleet.run("cpu", {"input": x})
        b = fleet.run("cpu", {"input": frozen})
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_none_as_an_input_is_an_error_naming_the_input(models):
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="sequential", config=SLIM) as fleet:
        fleet.start().wait()
        with pytest.raises(ortfleet.Error, match=r"^input 'input' is None: give a numpy array or a DLPack tensor"):
            fleet.run("cpu", {"input": None})


def test_an_unknown_device_is_quoted_as_given(models):
    for devices in (["cpu", "bogus"], "bogus"):
        with pytest.raises(ortfleet.Error, match=r"unknown device 'bogus'") as caught:
            ortfleet.Fleet(models["mlp"], devices=devices)
        assert "cuda:bogus" not in str(caught.value)
    with pytest.raises(ortfleet.Error, match=r"unknown device 'cuda:x'"):
        ortfleet.Fleet(models["mlp"], devices=["cuda:x"])


@pytest.mark.parametrize("strategy", ["threads", "processes"])
def test_a_failing_device_is_named_once(models, strategy):
    # Worker errors cross the worker socket with their structure (what failed, hint, device); the
    # device must not be appended again on either side of it.
    wrong = {"input": np.zeros((1, 63), np.float32)}
    with ortfleet.Fleet(models["mlp"], devices="cpu*2", strategy=strategy, config=SLIM) as fleet:
        fleet.start().wait()
        with pytest.raises(ortfleet.Error) as caught:
            fleet.run("cpu:1", wrong)
    message = str(caught.value)
    assert message.count("(on cpu:1)") == 1, message
    assert "(on cpu)" not in message, message


def test_a_device_that_fails_to_start_is_named_once(models, tmp_path, monkeypatch):
    # Each worker ends before it answers: a start failure reported for each device. (A profile folder
    # that cannot be made, which this test used, is now refused before any worker starts.)
    worker = tmp_path / "failing-worker"
    worker.write_text("#!/bin/sh\necho 'this worker fails on purpose' >&2\nexit 3\n")
    worker.chmod(0o755)
    monkeypatch.setenv("ORTFLEET_WORKER", str(worker))
    with ortfleet.Fleet(models["mlp"], devices="cpu*2", strategy="processes", config=SLIM) as fleet:
        assert not fleet.start().wait()
        for status in fleet.status():
            assert status["state"] == "failed"
            assert status["error"].count(f"(on {status['device']})") == 1, status["error"]
            assert status["error"].count("(on ") == 1, status["error"]


@pytest.mark.parametrize("strategy", ["threads", "processes"])
def test_run_async_returns_futures_with_the_outputs_of_run(models, strategy):
    with ortfleet.Fleet(models["mlp"], devices="cpu*2", strategy=strategy, config=SLIM) as fleet:
        fleet.start().wait()
        rng = np.random.default_rng(3)
        batches = [rng.uniform(-1, 1, (1, 64)).astype(np.float32) for _ in range(20)]
        # More runs in flight than a worker's ring has slots, over both devices, from one thread.
        futures = [fleet.run_async(("cpu", "cpu:1")[i % 2], {"input": x}) for i, x in enumerate(batches)]
        assert all(isinstance(f, ortfleet.RunFuture) for f in futures)
        for x, future in zip(batches, futures):
            got = future.result(timeout=60)
            assert future.done()
            want = fleet.run("cpu", {"input": x})
            assert got.keys() == want.keys()
            for name in want:
                np.testing.assert_array_equal(got[name], want[name])


def test_run_async_raises_the_errors_of_run(models):
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="processes", config=SLIM) as fleet:
        fleet.start().wait()
        with pytest.raises(ortfleet.Error):  # 3 is not 64: refused at once, or by the run
            fleet.run_async("cpu", {"input": np.zeros((1, 3), np.float32)}).result()
        with pytest.raises(ortfleet.Error, match="not part of this fleet"):
            fleet.run_async("cpu:5", {"input": np.zeros((1, 64), np.float32)})


@pytest.mark.parametrize("holds", ["fleet", "threads", "pool", "prewarm", "fleet_on_pool"])
def test_a_forked_child_exits_at_once_and_leaves_the_parents_fleet_and_pool_working(models, holds, run_script):
    # A child forked from a process holding a fleet or a pool has copies of them but none of their threads,
    # and their workers are the parent's: the child's copy refuses use, and the child's exit stops nothing.
    # Such a child hung as it exited (two hours: a fleet's wait for its after-ready work) or aborted
    # (std::system_error "No such process": a pool's threads joined), and could stop the parent's workers
    # (issue 58's audit).
    code = f"""
import os, sys, numpy as np, ortfleet
model, holds = {models["mlp"]!r}, {holds!r}
x = {{"input": np.zeros((1, 64), np.float32)}}
fleet = pool = None
if holds in ("fleet", "threads"):
    fleet = ortfleet.Fleet(model, devices="cpu", strategy="fleet" if holds == "fleet" else "threads", pool=False)
else:
    pool = ortfleet.Pool(devices="cpu") if holds != "prewarm" else ortfleet.prewarm(devices="cpu")
    pool.wait()
    if holds == "fleet_on_pool":
        fleet = ortfleet.Fleet(model, devices="cpu", pool=pool)
if fleet is not None:
    fleet.start()
    assert fleet.wait()
child = os.fork()
if child == 0:
    try:
        (fleet.run(0, x) if fleet is not None else pool.status())
        print("the child used the parent's", holds, flush=True)
    except ortfleet.Error as e:
        assert "forked" in str(e), e
    sys.exit(0)  # the interpreter's whole exit: atexit, the objects' ends
_, status = os.waitpid(child, 0)
print("child", status, flush=True)
if fleet is not None:
    print("parent", sorted(fleet.run(0, x)), flush=True)
else:
    print("parent", len(pool.status()["devices"]), flush=True)
"""
    rc, out, err = run_script(code, timeout=60)
    assert rc == 0, err
    assert "child 0" in out and "used the parent's" not in out, (out, err)
    assert "parent" in out, (out, err)


def test_a_profile_dir_that_is_a_file_is_refused_when_the_fleet_is_made(models, tmp_path):
    # As --profile-dir is: in words naming the keyword, before any work. It was a failed device after
    # wait(), in the standard library's words ("filesystem error: cannot create directories: Not a
    # directory [...]"; issue 58's audit).
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    with pytest.raises(ortfleet.Error, match=r"^profile_dir=.*notes.txt is not a folder"):
        ortfleet.Fleet(models["mlp"], devices="cpu", pool=False, profile_dir=str(a_file))
    with pytest.raises(ortfleet.Error, match=r"^profile_dir=.*notes.txt/sub cannot be made: Not a directory"):
        ortfleet.Fleet(models["mlp"], devices="cpu", pool=False, profile_dir=str(a_file / "sub"))
    assert a_file.read_text() == "mine\n"
    made = tmp_path / "profiles" / "deeper"
    with ortfleet.Fleet(models["mlp"], devices="cpu", pool=False, profile_dir=str(made)) as fleet:
        assert made.is_dir()  # a missing one is made
        fleet.start()
        assert fleet.wait()
