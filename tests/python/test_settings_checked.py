"""Every setting a model can contradict is refused when the Fleet is made, before start() and before any
worker: buckets, declared shapes, batches, warm-up inputs (a dict's dtype too) and input ranges, and two
inputs that share a symbolic dim given two sizes (check_config_against_model, the engine's one check,
which the command line calls too). Before, each was a failed device after wait() returned False."""
import os
import subprocess

import numpy as np
import pytest

import ortfleet

SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}
CLI = os.path.join(os.path.dirname(ortfleet.__file__), "bin", "ortfleet")


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    d = tmp_path_factory.mktemp("contradicted")
    masked = str(d / "masked.onnx")  # input_ids and attention_mask [1, sequence]: one symbolic dim, shared
    subprocess.run([CLI, "synth", "transformer", masked, "--layers", "1", "--hidden", "16", "--heads", "2", "--sequence", "32",
                    "--vocabulary", "50", "--dynamic-sequence", "--attention-mask"], check=True, capture_output=True)
    return {
        "fixed": ortfleet.synth_resnet(str(d / "fixed.onnx"), depth=18, image_size=32),      # input [1, 3, 32, 32]
        "segmenter": ortfleet.synth_segmenter(str(d / "segmenter.onnx"), channels=2, depth=0),  # image [1, 3, height, width]
        "mlp": ortfleet.synth_mlp(str(d / "mlp.onnx")),                                      # input [1, 64] float32
        "masked": masked,
    }


def no_worker_started(private_runtime_dir):
    runtime, socket = private_runtime_dir
    return not os.path.exists(socket)


@pytest.mark.parametrize("model, keywords, words", [
    ("fixed", {"buckets": {"input.2": [32, 64]}}, "buckets for input.2: dim 2 of input 'input' [1, 3, 32, 32] is fixed by the model"),
    ("segmenter", {"buckets": {"imag.2": [32, 64]}}, "buckets for imag.2: the model has no input 'imag'"),
    ("fixed", {"shapes": ["input=1x3x64x64"]}, "input 'input' has shape [1, 3, 64, 64]; the model expects [1, 3, 32, 32]"),
    ("mlp", {"batches": [1, 2]}, "batch sizes were declared, but no input of this model has a dynamic first dim"),
    ("mlp", {"warmup_inputs": {"input": np.zeros((1, 64))}},
     "warm-up input 'input' in the warmup_inputs dict is float64, and the model takes float32. Convert it: array.astype(numpy.float32)"),
    ("mlp", {"warmup_inputs": {"inputs": np.zeros((1, 64), np.float32)}},
     "the warmup_inputs dict holds 'inputs', which is not an input of this model (inputs: input)"),
    ("mlp", {"warmup_inputs": {"input": np.zeros((1, 65), np.float32)}}, "warm-up input 'input' in the warmup_inputs dict does not fit"),
    ("mlp", {"input_ranges": {"inptu": 3}}, "input range 'inptu' (input_ranges=) is not an input of this model (inputs: input)"),
    ("masked", {"input_ranges": {"input_ids": (0, 1e20)}}, "is beyond what int64 input 'input_ids' holds"),
    ("masked", {"shapes": [{"input_ids": (1, 10), "attention_mask": (1, 12)}]},
     "inputs 'input_ids' [1, 10] and 'attention_mask' [1, 12] share dim 'sequence' but were given 10 and 12: they must be equal"),
    ("masked", {"warmup_inputs": {"input_ids": np.zeros((1, 10), np.int64), "attention_mask": np.ones((1, 12), np.int64)}},
     "share dim 'sequence' but were given 10 and 12"),
])
def test_a_contradicted_setting_is_raised_by_the_constructor(zoo, keywords, model, words, private_runtime_dir, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", private_runtime_dir[0])
    with pytest.raises(ortfleet.Error) as e:
        ortfleet.Fleet(zoo[model], devices="cpu", config=SLIM, **keywords)
    text = str(e.value)
    assert words in text, text
    assert "\n" not in text and "/tmp/ortfleet-warmup-" not in text, text
    assert no_worker_started(private_runtime_dir), "a warm pool was left for a fleet that was refused"


def test_a_custom_op_library_that_cannot_be_loaded_is_raised_by_the_constructor(zoo, tmp_path, private_runtime_dir, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", private_runtime_dir[0])
    not_a_library = tmp_path / "libops.so"
    not_a_library.write_text("not a shared library")
    for library, words in [(str(tmp_path / "missing.so"), "cannot be read: No such file"),
                           (str(not_a_library), "is not a shared library (no ELF header)")]:
        config = {"ortfleet_config": 1, "session": dict(SLIM["session"], custom_op_libraries=[library])}
        with pytest.raises(ortfleet.Error) as e:
            ortfleet.Fleet(zoo["mlp"], devices="cpu", config=config)
        assert f"the custom-op library {library} {words}" in str(e.value), str(e.value)
        assert "session.custom_op_libraries" in str(e.value), str(e.value)
    assert no_worker_started(private_runtime_dir), "a warm pool was left for a fleet that was refused"


def test_the_same_settings_given_right_start(zoo):
    with ortfleet.Fleet(zoo["masked"], devices="cpu", strategy="threads", config=SLIM,
                        shapes=[{"input_ids": (1, 12), "attention_mask": (1, 12)}],
                        warmup_inputs={"input_ids": np.zeros((1, 12), np.int64), "attention_mask": np.ones((1, 12), np.int64)},
                        input_ranges={"input_ids": (0, 49)}) as fleet:
        assert fleet.start().wait(), fleet.status()


def test_a_run_whose_inputs_disagree_on_a_shared_dim_says_they_must_be_equal(zoo):
    """What ONNX Runtime trips on deep inside the graph, said as the cause: not 'not a multiple of 32'."""
    with ortfleet.Fleet(zoo["masked"], devices="cpu", strategy="threads", config=SLIM) as fleet:
        assert fleet.start().wait(), fleet.status()
        with pytest.raises(ortfleet.Error) as e:
            fleet.run("cpu", {"input_ids": np.zeros((1, 10), np.int64), "attention_mask": np.ones((1, 12), np.int64)})
    text = str(e.value)
    assert "share dim 'sequence' but were given 10 and 12: they must be equal" in text, text
    assert "multiple of 32" not in text, text


@pytest.mark.parametrize("model, config, words", [
    ("fixed", {"shapes": {"buckets": ["input.2=32,64"]}}, "is fixed by the model"),
    ("mlp", {"warmup": {"input_ranges": {"no_such_input": [0, 1]}}}, "input range 'no_such_input'"),
])
def test_the_diagnostics_check_their_config_before_any_child(zoo, model, config, words):
    for call in (ortfleet.profile, ortfleet.tune, ortfleet.bench):
        with pytest.raises(ortfleet.Error, match=words):
            call(zoo[model], config=config)
