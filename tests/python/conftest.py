"""Fixtures for the Python tests: models written once per session, the GPU marker, and a session kept
off the user's own warm pool and cache."""
import os
import shutil
import sys
import tempfile

import pytest

import ortfleet

# The whole session runs in a runtime folder and a cache of its own, whichever test runs and however it
# is run (one file alone too): a start with auto_pool would otherwise leave a warm pool on the user's
# real socket ($XDG_RUNTIME_DIR/ortfleet/pool.sock), and a developer's running pool would carry the
# tests' fleets. A test may still turn the pool on (ORTFLEET_AUTO_POOL unset): it lands in this folder,
# and is stopped when the session ends.
_SESSION_DIR = tempfile.mkdtemp(prefix="ortfleet-pytest-")
_RUNTIME_DIR = os.path.join(_SESSION_DIR, "xdg-run")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a GPU (skipped where there is none)")
    os.mkdir(_RUNTIME_DIR, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = _RUNTIME_DIR
    os.environ.setdefault("ORTFLEET_AUTO_POOL", "0")
    os.environ.setdefault("ORTFLEET_CACHE", os.path.join(_SESSION_DIR, "cache"))


def pytest_unconfigure(config):
    socket = ortfleet.default_pool_socket()
    if socket.startswith(_SESSION_DIR) and os.path.exists(socket):
        ortfleet.pool_stop(socket)
    shutil.rmtree(_SESSION_DIR, ignore_errors=True)


def _have_gpu():
    try:
        return any(True for _ in ortfleet.doctor()["gpus"])
    except Exception:
        return False


HAVE_GPU = _have_gpu()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a GPU")
    for item in items:
        if "gpu" in item.keywords and not HAVE_GPU:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    os.environ.setdefault("ORTFLEET_CACHE", str(d / "cache"))
    os.environ.setdefault("ORTFLEET_AUTO_POOL", "0")  # a developer's `ortfleet serve` must not carry the tests' fleets
    return {
        "mlp": ortfleet.synth_mlp(str(d / "mlp.onnx")),
        "resnet18": ortfleet.synth_resnet(str(d / "resnet18.onnx"), depth=18, image_size=64),
    }


@pytest.fixture(scope="session")
def python_exe():
    return sys.executable


@pytest.fixture
def run_script(python_exe):
    """Runs Python code in a fresh interpreter, as a user's script runs: (returncode, stdout, stderr).
    `env` adds to (or, with None values, removes from) this process's environment."""
    import subprocess

    def run(code, env=None, cwd=None, timeout=300):
        environment = dict(os.environ)
        for key, value in (env or {}).items():
            if value is None:
                environment.pop(key, None)
            else:
                environment[key] = value
        done = subprocess.run([python_exe, "-c", code], capture_output=True, text=True, env=environment, cwd=cwd, timeout=timeout)
        return done.returncode, done.stdout, done.stderr

    return run


@pytest.fixture
def private_runtime_dir(tmp_path):
    """An XDG_RUNTIME_DIR of the test's own (where a start leaves its warm pool), and the socket there;
    a pool found there at the end is stopped."""
    run = tmp_path / "xdg-run"
    run.mkdir(mode=0o700)
    socket = str(run / "ortfleet" / "pool.sock")
    yield str(run), socket
    if os.path.exists(socket):
        ortfleet.pool_stop(socket)
