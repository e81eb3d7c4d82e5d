"""Arguments as a Python user passes them (python/ortfleet/_calls.py): paths as os.PathLike everywhere a
path is taken, a model given as bytes refused in words, an unknown keyword named with the closest one,
a wrong type said in one line (never pybind11's "incompatible function arguments" dump of every
signature), and an ortfleet.Error that always has a message."""
import os
import pathlib

import numpy as np
import pytest

import ortfleet
from ortfleet import _ortfleet

SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}


class OwnPath(os.PathLike):
    """A PathLike that is not a pathlib.Path (what a user's own path class is)."""

    def __init__(self, path):
        self.path = str(path)

    def __fspath__(self):
        return self.path


def no_dump(text):
    assert "incompatible" not in text and "Invoked with" not in text and "The following argument types" not in text, text
    assert "\n" not in text, text


@pytest.mark.parametrize("as_path", [pathlib.Path, OwnPath])
def test_a_fleet_takes_its_model_and_config_as_paths(models, tmp_path, as_path):
    config = tmp_path / "slim.json"
    config.write_text('{"ortfleet_config": 1, "session": {"intra_op_threads": 1}}')
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    with ortfleet.Fleet(as_path(models["mlp"]), devices="cpu", strategy="threads", config=as_path(config),
                        profile_dir=as_path(profiles)) as fleet:
        assert fleet.start().wait(), fleet.status()
        (out,) = fleet.run("cpu", {"input": np.ones((1, 64), np.float32)}).values()
        assert out.shape[0] == 1
    assert os.listdir(profiles), "profile_dir given as a path was not used"


def test_warmup_inputs_and_the_runtime_as_paths(models, tmp_path):
    inputs = tmp_path / "warmup.npz"
    np.savez(inputs, input=np.zeros((1, 64), np.float32))
    runtime = pathlib.Path(ortfleet.load_runtime()["path"])
    with ortfleet.Fleet(pathlib.Path(models["mlp"]), devices="cpu", strategy="threads", config=SLIM, warmup_inputs=inputs,
                        ort_library=runtime) as fleet:
        assert fleet.start().wait(), fleet.status()
    assert ortfleet.load_runtime(runtime)["path"] == str(runtime.resolve())
    assert ortfleet.doctor(ort_library=runtime)["runtime"]["loaded"]


def test_the_writers_and_the_pool_functions_take_paths(tmp_path):
    written = ortfleet.synth_mlp(tmp_path / "m.onnx", layers=1, width=8)
    assert written == str(tmp_path / "m.onnx") and os.path.getsize(written) > 0
    for write in (ortfleet.synth_nodes, ortfleet.synth_resnet, ortfleet.synth_segmenter):
        name = write.__name__ + ".onnx"
        kwargs = {"synth_nodes": {"nodes": 30, "width": 4}, "synth_resnet": {"depth": 18, "image_size": 32},
                  "synth_segmenter": {"channels": 2, "depth": 0}}[write.__name__]
        assert os.path.exists(write(OwnPath(tmp_path / name), **kwargs))
    assert ortfleet.pool_stop(tmp_path / "no-pool.sock") is False
    with pytest.raises(ortfleet.Error) as e:
        ortfleet.pool_status(socket=tmp_path / "no-pool.sock")
    assert "no-pool.sock" in str(e.value)


def test_the_diagnostics_take_the_model_as_a_path(models):
    report = ortfleet.profile(pathlib.Path(models["mlp"]), device="cpu", runs=2)
    assert report["model"] == models["mlp"] or report["model"].endswith("mlp.onnx"), report["model"]


def test_a_model_given_as_its_bytes_is_refused_in_words(models):
    data = pathlib.Path(models["mlp"]).read_bytes()
    for call in (lambda: ortfleet.Fleet(data, devices="cpu"), lambda: ortfleet.profile(data), lambda: ortfleet.bench(bytearray(data))):
        with pytest.raises(ortfleet.Error) as e:
            call()
        text = str(e.value)
        assert f"model was given as {len(data)} bytes" in text and "write_bytes" in text, text
        no_dump(text)


def test_a_model_path_given_as_bytes_is_a_path(models):
    with ortfleet.Fleet(os.fsencode(models["mlp"]), devices="cpu", strategy="threads", config=SLIM) as fleet:
        assert fleet.start().wait(), fleet.status()


@pytest.mark.parametrize("call, wrong, meant", [
    (lambda m: ortfleet.Fleet(m, devicse="cpu"), "devicse", "devices"),
    (lambda m: ortfleet.Fleet(m, devices="cpu", warmup_input={}), "warmup_input", "warmup_inputs"),
    (lambda m: ortfleet.profile(m, devcie="cpu"), "devcie", "device"),
    (lambda m: ortfleet.bench(m, run=3), "run", "runs"),
    (lambda m: ortfleet.Pool(devices="cpu", ort_libary=""), "ort_libary", "ort_library"),
    (lambda m: ortfleet.prewarm(device="cpu"), "device", "devices"),
    (lambda m: ortfleet.synth_mlp("x.onnx", layer=2), "layer", "layers"),
])
def test_an_unknown_keyword_is_named_with_the_closest_one(models, call, wrong, meant):
    with pytest.raises(TypeError) as e:
        call(models["mlp"])
    text = str(e.value)
    assert f"unexpected keyword argument '{wrong}'; did you mean '{meant}'?" in text, text
    no_dump(text)


def test_an_unknown_keyword_with_nothing_close_lists_what_the_call_takes():
    with pytest.raises(TypeError) as e:
        ortfleet.doctor(verbose=True)
    assert "unexpected keyword argument 'verbose'; it takes: ort_library" in str(e.value)


@pytest.mark.parametrize("call, words", [
    (lambda m: ortfleet.Fleet(m, devices="cpu", warmup="1"), "Fleet(): warmup takes an int, not str ('1')"),
    (lambda m: ortfleet.Fleet(m, devices="cpu", start_timeout="long"), "Fleet(): start_timeout takes a number, not str ('long')"),
    (lambda m: ortfleet.Fleet(3), "Fleet(): model takes a str (or an os.PathLike, where it is a path), not int (3)"),
    (lambda m: ortfleet.Fleet(), "Fleet() is missing its argument 'model'"),
    (lambda m: ortfleet.Fleet(m, "cpu", "threads"), "Fleet() takes 2 positional arguments (model, devices), 3 given"),
    (lambda m: ortfleet.profile(m, runs=2.5), "ortfleet.profile(): runs takes an int, not float (2.5)"),
    (lambda m: ortfleet.synth_resnet(m + ".r.onnx", dynamic_batch="yes"), "dynamic_batch takes True or False, not str ('yes')"),
])
def test_a_wrong_type_is_one_line_naming_the_argument(models, call, words):
    with pytest.raises(TypeError) as e:
        call(models["mlp"])
    text = str(e.value)
    assert words in text, text
    no_dump(text)


def test_methods_too(models):
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="threads", config=SLIM) as fleet:
        assert fleet.start().wait()
        with pytest.raises(TypeError) as e:
            fleet.run("cpu", [np.ones((1, 64), np.float32)])
        assert "Fleet.run(): inputs takes a dict, not list" in str(e.value)
        no_dump(str(e.value))
        with pytest.raises(TypeError) as e:
            fleet.wait(timout=1)
        assert "did you mean 'timeout'?" in str(e.value)


def test_help_still_shows_the_bindings_signature_and_text():
    assert ortfleet.Fleet.__init__.__doc__.startswith("__init__(self: ortfleet._ortfleet.Fleet, model: str")
    assert "warmup_inputs: Real inputs for warm-up" in ortfleet.Fleet.__init__.__doc__
    assert ortfleet.profile.__name__ == "profile" and "ortfleet profile --json" in ortfleet.profile.__doc__


def test_an_ortfleet_error_always_has_a_message():
    """A message quoting bytes that are not UTF-8 (a file name, a model given as bytes straight to the
    extension) was raised as an ortfleet.Error with no message at all."""
    init = _ortfleet.Fleet.__init__.__wrapped__  # the binding itself, past the argument checks
    for model in (b"\x08\x07\xff\xfe not a model", b"caf\xe9-missing.onnx"):
        fleet = _ortfleet.Fleet.__new__(_ortfleet.Fleet)
        with pytest.raises(ortfleet.Error) as e:
            init(fleet, model, devices="cpu")
        assert str(e.value) and e.value.args, "an ortfleet.Error without a message"
        assert "\\xe9" in str(e.value) or "\\xff" in str(e.value), str(e.value)


def test_a_file_name_that_is_not_utf8_reaches_the_file(tmp_path, models):
    odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/mod\xe9l.onnx")  # a Latin-1 name, held by Python as a surrogate
    pathlib.Path(odd).write_bytes(pathlib.Path(models["mlp"]).read_bytes())
    with ortfleet.Fleet(odd, devices="cpu", strategy="threads", config=SLIM) as fleet:
        assert fleet.start().wait(), fleet.status()
