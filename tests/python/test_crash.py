"""A crash inside ONNX Runtime seen from Python: injected by a custom op that segfaults
(tests/support/crash_ops.cpp). In this process it ends the interpreter with the one line that says
what crashed and how to locate it; in a worker it is the device's error and Python lives on."""
import os
import pathlib
import subprocess
import sys

import pytest

import ortfleet

BIN = pathlib.Path(os.environ.get("ORTFLEET_BUILD_DIR", "build/release")) / "bin"


@pytest.fixture(scope="module")
def crash_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("crash") / "chain.onnx"
    maker = BIN / "ortfleet_test_crash_model"
    if not maker.exists():  # a helper not built fails the test: a skip here would pass unseen
        pytest.fail(f"{maker} is not built: build the tests first (cmake --build --preset release --target ortfleet_all_tests; "
                    "scripts/test.sh does)")
    subprocess.run([str(maker), str(path), "40", "23"], check=True)
    return str(path)


def config():
    return {"session": {"custom_op_libraries": [str(BIN / "libortfleet_test_crash_ops.so")], "intra_op_threads": 1}}


def test_an_in_process_crash_ends_python_with_the_line_that_locates_it(crash_model, tmp_path):
    script = (f"import ortfleet\n"
              f"f = ortfleet.Fleet({crash_model!r}, devices='cpu', strategy='sequential', config={config()!r})\n"
              f"f.start().wait(60)\n")
    env = dict(os.environ, ORTFLEET_CACHE=str(tmp_path / "cache"), ORTFLEET_AUTO_POOL="0")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == -11, (r.returncode, r.stderr)
    assert f"ortfleet: SIGSEGV (segmentation fault) inside ONNX Runtime during the first inference of {crash_model} on cpu" in r.stderr
    assert f"ortfleet doctor {crash_model} --locate-crash --device cpu --custom-ops" in r.stderr


def test_a_workers_crash_is_the_devices_error_and_python_lives_on(crash_model, tmp_path, monkeypatch):
    monkeypatch.setenv("ORTFLEET_CACHE", str(tmp_path / "cache"))
    with ortfleet.Fleet(crash_model, devices="cpu", strategy="processes", config=config()) as fleet:
        assert not fleet.start().wait(60)
        (status,) = fleet.status()
        assert "killed by signal SIGSEGV" in status["error"], status
        assert "inside ONNX Runtime during the first inference" in status["error"], status
        assert "--locate-crash" in status["error"], status
