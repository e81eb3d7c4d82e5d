"""Fixtures for the Python tests: models written once per session, the GPU marker."""
import os
import sys

import pytest

import ortfleet


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a GPU (skipped where there is none)")


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
