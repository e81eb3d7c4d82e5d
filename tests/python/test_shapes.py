"""Shape-aware sessions from Python: Fleet's shapes=, batches=, max_shape_sessions= and pad_batch=."""
import numpy as np
import pytest

import ortfleet

SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    """A tiny ResNet whose batch dim is dynamic."""
    path = tmp_path_factory.mktemp("shapes") / "resnet18-dynamic.onnx"
    return ortfleet.synth_resnet(str(path), depth=18, image_size=32, dynamic_batch=True)


def images(batch, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (batch, 3, 32, 32)).astype(np.float32)


def warmed_shapes(fleet):
    """The shape signatures the start-up warmed up (recorded when a device has more than one)."""
    return {e["args"]["shapes"] for e in fleet.timeline()["events"] if e["name"] == "warmup" and "shapes" in e["args"]}


def only(outputs):
    (value,) = outputs.values()
    return value


@pytest.mark.parametrize("strategy", ["threads", "processes"])  # processes: the keywords reach the worker
def test_declared_batches_give_what_one_session_for_every_shape_gives(resnet, strategy):
    with ortfleet.Fleet(resnet, devices="cpu", strategy=strategy, config=SLIM, batches=[1, 2]) as per_shape, \
            ortfleet.Fleet(resnet, devices="cpu", strategy=strategy, config=SLIM, batches=[1, 2], max_shape_sessions=1) as shared:
        assert per_shape.start().wait() and shared.start().wait()
        assert warmed_shapes(per_shape) == {"input=1x3x32x32", "input=2x3x32x32"}
        assert per_shape.inputs[0]["shape"][0] == -1
        for batch in (1, 2):
            x = images(batch, seed=batch)
            a = only(per_shape.run("cpu", {"input": x}))
            b = only(shared.run("cpu", {"input": x}))
            assert a.shape[0] == batch
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_a_padded_batch_gives_the_unpadded_outputs(resnet):
    with ortfleet.Fleet(resnet, devices="cpu", strategy="threads", config=SLIM, batches=[4], pad_batch=True) as padded, \
            ortfleet.Fleet(resnet, devices="cpu", strategy="threads", config=SLIM) as plain:
        assert padded.start().wait() and plain.start().wait()
        x = images(3, seed=7)
        a = only(padded.run("cpu", {"input": x}))
        b = only(plain.run("cpu", {"input": x}))
        assert a.shape[0] == 3
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("shapes", [
    ["input=1x3x32x32", "input=2x3x32x32"],
    "input=1x3x32x32,input=2x3x32x32",                      # one string, two signatures
    [{"input": (1, 3, 32, 32)}, {"input": [np.int64(2), 3, 32, 32]}],
    ["input=1x3x32x32", {"input": (2, 3, 32, 32)}],
])
def test_shapes_as_strings_and_dicts(resnet, shapes):
    with ortfleet.Fleet(resnet, devices="cpu", strategy="threads", config=SLIM, shapes=shapes) as fleet:
        assert fleet.start().wait(), fleet.status()
        assert warmed_shapes(fleet) == {"input=1x3x32x32", "input=2x3x32x32"}


def test_keywords_override_the_config(resnet):
    config = {**SLIM, "shapes": {"batches": [1, 2, 4], "pad_batch": True}}
    with ortfleet.Fleet(resnet, devices="cpu", strategy="threads", config=config, batches=[1, 2]) as fleet:
        assert fleet.start().wait(), fleet.status()
        assert warmed_shapes(fleet) == {"input=1x3x32x32", "input=2x3x32x32"}
        assert only(fleet.run("cpu", {"input": images(2)})).shape[0] == 2
    with ortfleet.Fleet(resnet, devices="cpu", strategy="threads", config=config) as fleet:
        assert fleet.start().wait(), fleet.status()
        assert warmed_shapes(fleet) == {"input=1x3x32x32", "input=2x3x32x32", "input=4x3x32x32"}


@pytest.mark.parametrize("keywords,message", [
    ({"shapes": [3]}, r"shapes: 3 is neither a string nor a dict"),
    ({"shapes": 3}, r"shapes is a list of strings"),
    ({"shapes": ["input=ax3"]}, r"'a' in 'input=ax3' is not a whole number"),
    ({"shapes": [{"input": (0, 3, 32, 32)}]}, r"dims of input 'input' must be positive whole numbers, not 0"),
    ({"shapes": [{"input": (1.5, 3)}]}, r"dims of input 'input' must be positive whole numbers, not 1.5"),
    ({"shapes": [{"input": "1x3"}]}, r"input 'input' needs a tuple of dims"),
    ({"shapes": [{1: (1, 3)}]}, r"shapes: input names are strings"),
    ({"batches": [0]}, r"batches: batch sizes are positive whole numbers, not 0"),
    ({"batches": [1, 2.5]}, r"batches: batch sizes are positive whole numbers, not 2.5"),
    ({"batches": [True]}, r"batches: batch sizes are positive whole numbers, not True"),
    ({"batches": 4}, r"batches is a list of batch sizes"),
    ({"max_shape_sessions": 0}, r"max_shape_sessions=0 is out of range: give a whole number from 1 to 256"),
    ({"max_shape_sessions": 257}, r"max_shape_sessions=257 is out of range: give a whole number from 1 to 256"),
    ({"pad_batch": True}, r"pad_batch needs declared batches to pad to"),
])
def test_bad_shape_keywords_are_ortfleet_errors(resnet, keywords, message):
    with pytest.raises(ortfleet.Error, match=message):
        ortfleet.Fleet(resnet, devices="cpu", strategy="threads", config=SLIM, **keywords)


@pytest.mark.parametrize("keywords,message", [
    ({"max_shape_sessions": "8"}, r"Fleet\(\): max_shape_sessions takes an int or None, not str \('8'\)"),
    ({"max_shape_sessions": 2.5}, r"Fleet\(\): max_shape_sessions takes an int or None, not float \(2.5\)"),
    ({"pad_batch": "yes"}, r"Fleet\(\): pad_batch takes True or False or None, not str \('yes'\)"),
])
def test_shape_keywords_of_the_wrong_type_are_type_errors(resnet, keywords, message):
    with pytest.raises(TypeError, match=message):
        ortfleet.Fleet(resnet, devices="cpu", strategy="threads", config=SLIM, **keywords)


@pytest.fixture(scope="module")
def segmenter(tmp_path_factory):
    """A fully convolutional net with dynamic height and width: its output map follows both."""
    return ortfleet.synth_segmenter(str(tmp_path_factory.mktemp("buckets") / "segmenter.onnx"), channels=4, depth=1)


@pytest.mark.parametrize("strategy", ["threads", "processes"])  # processes: the buckets reach the worker
@pytest.mark.parametrize("buckets", [{"image.2": [32, 64], "image.3": "32:64:32"}, ["image.2=32,64", "image.3=32,64"]])
def test_buckets_pad_any_dim_and_crop_the_outputs_back(segmenter, strategy, buckets):
    with ortfleet.Fleet(segmenter, devices="cpu", strategy=strategy, config=SLIM, buckets=buckets) as fleet:
        assert fleet.start().wait()
        assert warmed_shapes(fleet) == {f"image=1x3x{h}x{w}" for h in (32, 64) for w in (32, 64)}
        for h, w in ((24, 40), (64, 8), (32, 32)):
            x = np.random.default_rng(h * w).uniform(-1, 1, (1, 3, h, w)).astype(np.float32)
            assert only(fleet.run("cpu", {"image": x})).shape == (1, 1, h // 4, w // 4)


@pytest.mark.parametrize("keywords, message", [
    ({"buckets": {"picture.2": [32]}}, r"no input 'picture'"),
    ({"buckets": {"image.1": [3]}}, r"is fixed by the model"),
    ({"buckets": ["image.2=0"]}, r"dims must be positive"),
    ({"buckets": {"image.2": [32.5]}}, r"must be whole numbers, not 32.5"),
    ({"pad_values": {"image": "zero"}}, r"pad value of 'image' must be a number, not 'zero'"),
    ({"pad_values": [0]}, r"pad_values must be a dict"),
    ({"shape_policy": "always"}, r"shape_policy=always is not one of measured, per-shape, shared"),
])
def test_bad_bucket_keywords_are_ortfleet_errors(segmenter, keywords, message):
    with pytest.raises(ortfleet.Error, match=message):
        fleet = ortfleet.Fleet(segmenter, devices="cpu", strategy="threads", config=SLIM, **keywords)
        fleet.start().wait()
        fleet.status()  # a start-up error surfaces here at the latest
        raise ortfleet.Error(str([s["error"] for s in fleet.status()]))
