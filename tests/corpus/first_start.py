"""A model's first start (issue 61) on every model of the real-model corpus: the session made from the
model's view (its graph handed to ONNX Runtime with its weights left in its file; on a GPU uploaded by
ortfleet), as a first start on an empty cache makes it, gives the outputs of a plain session (the model
read by ONNX Runtime itself, no cache) on the same inputs: bit for bit on the CPU, within 1e-6 of the
output's scale on a GPU (its kernels may choose other algorithms per session).

Usage: first_start.py MODELS_DIR DEVICE (cpu, or a GPU number). Exit 77 (skip) without the corpus or the GPU.
"""
import os
import sys
import tempfile

import numpy as np
import ortfleet

from corpus_inputs import F, I, MEL, VAD4, VAD5, devices_or_skip, inputs_for

models, device = sys.argv[1], sys.argv[2]
devices = devices_or_skip(models, device)
# name, input ranges, declared shapes (the call's shapes; other dynamic dims are 1)
CASES = [
    ("isnet_quint8", {}, None),
    ("isnet_fp16", {}, None),
    ("oww_melspectrogram", MEL, ["input=1x1760"]),
    ("oww_embedding", {}, None),
    ("oww_hey_jarvis", {}, None),
    ("owwjs_hello_deepa", {}, None),
    ("silero_vad_v4", VAD4, ["input=1x1536"]),
    ("silero_vad_v5", VAD5, ["input=1x576,state=2x1x128"]),
    ("ppocrv4_det", {}, ["x=1x3x640x640"]),
    ("ppocrv4_rec", {}, ["x=1x3x48x320"]),
]
DTYPES = {"float32": F, "float16": np.float16, "int64": I, "int32": np.int32, "uint8": np.uint8, "int8": np.int8, "bool": np.bool_}


def call_of(inputs, shapes):
    """Each input's shape (a declared one, else its dims with every dynamic one 1) and dtype."""
    declared = {}
    for text in shapes or []:
        for part in text.split(","):
            input_name, dims = part.split("=")
            declared[input_name] = tuple(int(d) for d in dims.split("x"))
    return {i["name"]: (declared.get(i["name"], tuple(d if d > 0 else 1 for d in i["shape"])), DTYPES[i.get("type", "float32")]) for i in inputs}


rng = np.random.default_rng(11)
failures = 0
for name, ranges, shapes in CASES:
    model = f"{models}/{name}.onnx"
    if not os.path.exists(model):
        print(f"skip {name}: not in {models}")  # a GPU machine gets the corpus in parts
        continue
    kw = dict(devices=devices, strategy="threads", pool=False, input_ranges={k: list(v) for k, v in ranges.items()} or None, shapes=shapes)
    given = None
    outputs = {}
    for way, session in (("plain", {"optimized_model_cache": False}), ("view", {"optimized_model_cache": True, "model_cache_fill": "off"})):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["ORTFLEET_CACHE"] = cache  # empty: a first start
            with ortfleet.Fleet(model, config={"session": session}, **kw) as fleet:
                fleet.start()
                if not fleet.wait():
                    print(f"FAIL {name} ({way}): {fleet.status()[0]['error']}")
                    failures += 1
                    break
                if given is None:
                    given = inputs_for(rng, call_of(fleet.inputs, shapes), ranges)
                outputs[way] = fleet.run(fleet.devices[0], given)
    if len(outputs) < 2:
        continue
    for output, a in outputs["plain"].items():
        b = outputs["view"][output]
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        scale = float(np.max(np.abs(a64))) if a.size else 0.0
        diff = float(np.max(np.abs(a64 - b64))) if a.size and a.shape == b.shape else float("inf")
        ok = a.shape == b.shape and (diff == 0 if device == "cpu" else diff <= 1e-6 * max(1.0, scale))
        failures += 0 if ok else 1
        print(f"{'ok  ' if ok else 'FAIL'} {name}: output {output}: max |diff| {diff:.3g} of {scale:.3g}")
print("corpus first start from the view:", "ok" if failures == 0 else f"{failures} different")
sys.exit(1 if failures else 0)
