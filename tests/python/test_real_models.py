"""Real models from the field (tests/corpus/models.json, fetched by scripts/fetch-real-models.sh):
warm-up inputs given from Python, as numpy arrays or as files numpy wrote, and the model cache's
verified entries. Skipped where the corpus was not fetched."""
import json
import os
import pathlib

import numpy as np
import pytest

import ortfleet

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / ".deps" / "models"
SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}


def corpus_model(name):
    path = MODELS / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"the real-model corpus is not fetched ({path}); run scripts/fetch-real-models.sh")
    return str(path)


def vad_v5_inputs(samples=576):
    """What @ricky0123/vad-web feeds Silero VAD v5: 64 samples of context + 512 new ones, a zero
    state, and the sample rate."""
    t = np.arange(samples, dtype=np.float32) / 16000
    return {"input": (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None, :],
            "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}


def test_warm_up_inputs_as_arrays_make_a_real_recurrent_model_ready(tmp_path, monkeypatch):
    monkeypatch.setenv("ORTFLEET_CACHE", str(tmp_path / "cache"))
    model = corpus_model("silero_vad_v5")
    inputs = vad_v5_inputs()
    with ortfleet.Fleet(model, devices=["cpu"], config=SLIM, warmup_inputs=inputs).start() as fleet:
        assert fleet.wait(120), fleet.status()
        first = fleet.run("cpu", inputs)
        # The entry is made after ready, in the background: a job that ends first leaves none.
        made = fleet.wait_for_cache_fill(120)
        assert made and "made the model cache entry" in made, made
    # The second start loads the verified cache entry and gives the same outputs.
    with ortfleet.Fleet(model, devices=["cpu"], config=SLIM, warmup_inputs=inputs).start() as fleet:
        assert fleet.wait(120), fleet.status()
        creates = [e for e in fleet.timeline()["events"] if e["name"] == "session.create"]
        assert creates and creates[0]["args"].get("model_cache") == "hit", creates
        again = fleet.run("cpu", inputs)
    for name in first:
        np.testing.assert_allclose(first[name], again[name], rtol=1e-4, atol=1e-5)


def test_made_up_inputs_fail_a_real_model_with_a_message_saying_what_to_give(tmp_path, monkeypatch):
    monkeypatch.setenv("ORTFLEET_CACHE", str(tmp_path / "cache"))
    model = corpus_model("silero_vad_v5")
    with ortfleet.Fleet(model, devices=["cpu"], config=SLIM).start() as fleet:
        assert not fleet.wait(120)
        (status,) = fleet.status()
        assert "inputs ortfleet made up" in status["error"], status
        assert "warmup_inputs" in status["error"], status


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["savez", "savez_compressed"])
def test_warm_up_inputs_from_files_numpy_wrote(tmp_path, monkeypatch, save):
    monkeypatch.setenv("ORTFLEET_CACHE", str(tmp_path / "cache"))
    model = corpus_model("silero_vad_v5")
    path = tmp_path / "vad.npz"
    save(path, **vad_v5_inputs(640))
    with ortfleet.Fleet(model, devices=["cpu"], config=SLIM, warmup_inputs=str(path)).start() as fleet:
        assert fleet.wait(120), fleet.status()
        warmups = [e for e in fleet.timeline()["events"] if e["name"] == "warmup"]
        assert warmups


def test_input_ranges_from_python(tmp_path, monkeypatch):
    monkeypatch.setenv("ORTFLEET_CACHE", str(tmp_path / "cache"))
    model = corpus_model("silero_vad_v4")
    config = dict(SLIM, shapes={"declared": ["input=1x1536"]})
    with ortfleet.Fleet(model, devices=["cpu"], config=config, input_ranges={"sr": 16000, "h": 0, "c": (0, 0)}).start() as fleet:
        assert fleet.wait(120), fleet.status()


def test_the_corpus_documents_every_model_it_fetches():
    corpus = json.loads((ROOT / "tests" / "corpus" / "models.json").read_text())
    for m in corpus["models"]:
        assert m["package"] in corpus["packages"], m["name"]
        assert len(m["sha256"]) == 64 and m["what"], m["name"]
        assert corpus["packages"][m["package"]]["licence"], m["package"]
