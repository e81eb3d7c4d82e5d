"""The module as a Python user meets it: its public names, its type stubs, ortfleet.Error, the model's
inputs known before start(), and devices refused with what is valid."""
import ast
import inspect
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ortfleet
from ortfleet import _ortfleet

PUBLIC = {"DeviceTensor", "Error", "Fleet", "LeftBehindWarning", "Pool", "RunFuture", "bench", "default_pool_socket", "doctor",
          "load_runtime", "pool_status", "pool_stop", "prewarm", "profile", "synth_mlp", "synth_nodes", "synth_resnet",
          "synth_segmenter", "tune"}
STUB = os.path.join(os.path.dirname(ortfleet.__file__), "_ortfleet.pyi")


def test_the_public_names_are_the_api_and_nothing_else():
    assert {n for n in dir(ortfleet) if not n.startswith("_")} == PUBLIC
    assert set(ortfleet.__all__) == PUBLIC


def test_error_and_warning_are_ortfleets_own():
    assert issubclass(ortfleet.Error, RuntimeError) and ortfleet.Error.__module__ == "ortfleet"
    assert issubclass(ortfleet.LeftBehindWarning, UserWarning)
    assert repr(ortfleet.Error("x")).startswith("Error(")


def _stub_members():
    """Top-level names of the stub, and the members of each class it declares."""
    with open(STUB, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return names, members


def test_the_stub_is_installed_with_the_package_and_has_every_name_of_the_module():
    assert os.path.exists(STUB) and os.path.exists(os.path.join(os.path.dirname(STUB), "py.typed"))
    names, members = _stub_members()
    runtime = {n for n in dir(_ortfleet) if not n.startswith("__")}
    assert names == runtime, f"only in the stub: {names - runtime}; only in the module: {runtime - names}"
    for cls, declared in members.items():
        if not declared:
            continue  # an exception class
        bound = {n for n, _ in inspect.getmembers(getattr(_ortfleet, cls)) if not n.startswith("_") or n in declared}
        bound -= set(dir(object)) - declared
        assert declared == bound, f"{cls}: only in the stub: {declared - bound}; only in the module: {bound - declared}"


def test_the_stub_matches_the_module_for_mypy_stubtest(tmp_path):
    pytest.importorskip("mypy.stubtest", reason="mypy is not installed (Debian: python3-mypy)")
    allow = tmp_path / "allowlist"
    # What pybind11 makes and a stub does not say: the metaclass of every bound class, and the
    # constructor that refuses of classes only ortfleet makes (Fleet.run_async's futures, outputs).
    allow.write_text("ortfleet._ortfleet.(DeviceTensor|Fleet|Pool|RunFuture)\n"
                     "ortfleet._ortfleet.(DeviceTensor|RunFuture).__init__\n")
    env = dict(os.environ, MYPYPATH=os.path.dirname(os.path.dirname(STUB)))
    done = subprocess.run([sys.executable, "-m", "mypy.stubtest", "ortfleet._ortfleet", "--allowlist", str(allow),
                           "--ignore-unused-allowlist"],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_fleets_inputs_are_known_before_start_and_the_same_after(models, tmp_path):
    models = dict(models, segmenter=ortfleet.synth_segmenter(str(tmp_path / "seg.onnx"), channels=4, depth=0),
                  dynamic=ortfleet.synth_resnet(str(tmp_path / "dyn.onnx"), depth=18, image_size=64, dynamic_batch=True))
    for name, model in models.items():
        with ortfleet.Fleet(model, devices="cpu", strategy="threads") as fleet:
            before = (fleet.inputs, fleet.outputs)
            assert before[0] and before[1], name
            assert fleet.start().wait(120)
            assert (fleet.inputs, fleet.outputs) == before, name
    with ortfleet.Fleet(models["segmenter"], devices="cpu") as fleet:
        assert fleet.inputs == [{"name": "image", "type": "float32", "shape": [1, 3, -1, -1]}]


def test_a_device_not_in_the_fleet_is_refused_with_the_devices_it_has(models):
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="threads") as fleet:
        assert fleet.start().wait(120)
        x = {"input": np.zeros((1, 64), np.float32)}
        assert fleet.run(0, x) and fleet.run("cpu", x) and fleet.run(fleet.devices[0], x)  # 0: the first device of a CPU fleet
        with pytest.raises(ortfleet.Error, match=r"device cuda:0 is not part of this fleet; it has: cpu\."):
            fleet.run("cuda:0", x)
        with pytest.raises(ortfleet.Error, match=r"device 1 is not part of this fleet; it has: cpu \(a fleet without GPUs numbers"):
            fleet.run(1, x)
        # A number past any C++ int is refused in the same words, not by pybind11's "Unable to cast Python
        # instance to C++ type" (issue 58's audit).
        with pytest.raises(ortfleet.Error, match=r"device 1180591620717411303424 is not part of this fleet"):
            fleet.run(2**70, x)
        assert fleet.ready(0)
    with pytest.raises(ortfleet.Error, match=r"device 1180591620717411303424 is no GPU ordinal"):
        ortfleet.Fleet(models["mlp"], devices=[2**70])
    with pytest.raises(ortfleet.Error, match=r"device -1 is no GPU ordinal"):
        ortfleet.Fleet(models["mlp"], devices=[-1])
