"""ONNX Runtime's refusals at run time in ortfleet's words: a wrong dtype names the input and the
conversion, sizes the graph cannot combine name the inputs given and declared; ONNX Runtime's own
log line of the failure stays off stderr (it is a DEBUG record of the logger "ortfleet")."""
import numpy as np
import pytest

import ortfleet

SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}


@pytest.fixture(scope="module")
def segmenter(tmp_path_factory):
    return ortfleet.synth_segmenter(str(tmp_path_factory.mktemp("seg") / "segmenter.onnx"), channels=4, depth=0)


@pytest.mark.parametrize("strategy", ["threads", "processes"])
def test_a_wrong_dtype_names_the_input_and_the_conversion(models, strategy):
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy=strategy, config=SLIM) as fleet:
        assert fleet.start().wait(120)
        with pytest.raises(ortfleet.Error) as refused:
            fleet.run(0, {"input": np.zeros((1, 64), np.float64)})
        text = str(refused.value)
        assert "input 'input' is float64 (double); the model takes float32 (float)" in text
        assert ".astype(numpy.float32)" in text and "tensor(double)" not in text
        # The same call, converted as said, runs.
        out = fleet.run(0, {"input": np.zeros((1, 64), np.float64).astype(np.float32)})
        assert len(out) == 1


@pytest.mark.parametrize("strategy", ["threads", "processes"])
def test_sizes_the_graph_cannot_combine_name_the_inputs_and_the_multiple(segmenter, strategy):
    with ortfleet.Fleet(segmenter, devices="cpu", strategy=strategy, config=SLIM) as fleet:
        assert fleet.start().wait(120)
        assert fleet.run(0, {"image": np.zeros((1, 3, 64, 96), np.float32)})  # multiples of 32 run
        with pytest.raises(ortfleet.Error) as refused:
            fleet.run(0, {"image": np.zeros((1, 3, 33, 47), np.float32)})
        text = str(refused.value)
        assert "the model could not take the sizes it was given" in text
        assert "'image' [1, 3, 33, 47] (the model declares [" in text
        assert "image.2 = 33, image.3 = 47 are not a multiple of 32" in text
        assert "image.2=64, image.3=64" in text
        assert "element_wise_ops" not in text and "Non-zero status code" not in text


def test_onnx_runtimes_log_line_of_a_failed_run_stays_off_stderr(segmenter, run_script):
    code = f"""
import numpy as np, ortfleet
with ortfleet.Fleet({segmenter!r}, devices="cpu", strategy="threads") as fleet:
    fleet.start().wait()
    try:
        fleet.run(0, {{"image": np.zeros((1, 3, 33, 47), np.float32)}})
    except ortfleet.Error as e:
        print("refused")
"""
    rc, stdout, stderr = run_script(code)
    assert rc == 0, stderr
    assert stdout == "refused\n"
    assert "element_wise_ops" not in stderr and "Non-zero status code" not in stderr, stderr
    # With logging at DEBUG, ONNX Runtime's raw text is there, as a record of the logger "ortfleet".
    debug = "import logging\nlogging.basicConfig(level=logging.DEBUG, format='%(name)s %(levelname)s %(message)s')\n"
    rc, stdout, stderr = run_script(debug + code)
    assert rc == 0, stderr
    assert any(line.startswith("ortfleet DEBUG") and "Attempting to broadcast" in line for line in stderr.splitlines()), stderr
