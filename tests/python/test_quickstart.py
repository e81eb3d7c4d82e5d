"""The Python quick-starts of README.md and docs/python.md run as written, here on the CPU.

Every ```python block of those pages that opens "model.onnx" is a quick-start: it runs in a fresh
interpreter, in a folder holding a model.onnx whose input is "input" [1, 3, 224, 224] (what the
blocks feed), with no GPU visible (CUDA_VISIBLE_DEVICES=""), so that a machine without one runs
them as a new user does. Its warm pool, if it leaves one, lands in a runtime folder of the test's
own and is stopped at the end.
"""
import os
import re

import pytest

import ortfleet

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PAGES = ["README.md", os.path.join("docs", "python.md")]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def quick_starts():
    found = []
    for page in PAGES:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        blocks = [b for b in BLOCK.findall(text) if '"model.onnx"' in b]
        found += [pytest.param(block, id=f"{page}#{i + 1}") for i, block in enumerate(blocks)]
    return found


QUICK_STARTS = quick_starts()


def test_each_page_has_its_quick_start():
    pages = {p.id.split("#")[0] for p in QUICK_STARTS}
    assert pages == set(PAGES), f"a page lost its Python quick-start (a ```python block that opens \"model.onnx\"): {pages}"


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quickstart")
    ortfleet.synth_resnet(str(folder / "model.onnx"), depth=18, image_size=224)
    return folder


@pytest.mark.parametrize("block", QUICK_STARTS)
def test_the_quick_start_runs_as_written_without_a_gpu(block, model_folder, run_script, private_runtime_dir, tmp_path):
    runtime, socket = private_runtime_dir
    # As written, then one line of ours: what it computed, on stdout, which nothing else may write to.
    code = block + '\nprint("outputs:", sorted((name, value.shape) for name, value in out.items()))\n'
    env = {"CUDA_VISIBLE_DEVICES": "", "XDG_RUNTIME_DIR": runtime, "ORTFLEET_CACHE": str(tmp_path / "cache"), "ORTFLEET_AUTO_POOL": None}
    code_rc, stdout, stderr = run_script(code, env=env, cwd=str(model_folder))
    assert code_rc == 0, f"the quick-start failed:\n{block}\nstderr:\n{stderr}"
    assert re.fullmatch(r"outputs: \[\('[^']+', \(1, 1000\)\)\]\n", stdout), stdout
    assert "Traceback" not in stderr, stderr
