"""Buckets on every model of the real-model corpus (issue 58): each bucketed model either serves calls of
sizes between its buckets within tolerance of an unbucketed session of the same model on the same
inputs, or is refused, naming why; never silently different.

Usage: buckets.py MODELS_DIR DEVICE (cpu, or a GPU number). Exit 77 (skip) without the corpus or the GPU.
The tolerance is the one ortfleet refuses buckets beyond (|a - b| <= 1e-2 * max(1, max|a|) + 1e-2 * |a|).
"""
import os
import sys

import numpy as np
import ortfleet

from corpus_inputs import F, I, MEL, VAD4, VAD5, devices_or_skip, inputs_for

models, device = sys.argv[1], sys.argv[2]
devices = devices_or_skip(models, device)
rng = np.random.default_rng(7)
# name, buckets, input ranges, declared shapes, calls (input -> (shape, dtype)); "refused" lists a
# model whose buckets the model itself forbids (a fixed dim) or whose padding changes its outputs.
CASES = [
    ("isnet_quint8", {"input.2": [512, 1024]}, {}, None, []),
    ("isnet_fp16", {"input.2": [512, 1024]}, {}, None, []),
    ("oww_hey_jarvis", {"x.1.1": [8, 16]}, {}, None, []),
    ("owwjs_hello_deepa", {"onnx::Flatten_0.1": [16, 25]}, {}, None, []),
    ("oww_embedding", {"input_1.0": [1, 2, 4]}, {}, None, [{"input_1": ((3, 76, 32, 1), F)}]),
    ("oww_melspectrogram", {"input.1": [1760, 3520]}, MEL, ["input=1x1760"], [{"input": ((1, 1000), F)}, {"input": ((1, 2800), F)}]),
    ("ppocrv4_det", {"x.2": [320, 640], "x.3": [320, 640]}, {}, None, [{"x": ((1, 3, 256, 416), F)}, {"x": ((1, 3, 480, 608), F)}]),
    ("ppocrv4_det", {"x.0": [1, 2, 4]}, {}, ["x=1x3x320x320"], [{"x": ((3, 3, 320, 320), F)}]),
    ("ppocrv4_rec", {"x.3": [160, 320]}, {}, ["x=1x3x48x160"], [{"x": ((1, 3, 48, 120), F)}, {"x": ((1, 3, 48, 250), F)}]),
    ("ppocrv4_rec", {"x.0": [1, 2, 4]}, {}, ["x=1x3x48x320"], [{"x": ((3, 3, 48, 320), F)}]),
    ("silero_vad_v4", {"input.1": [512, 1536]}, VAD4, ["input=1x512"],
     [{"input": ((1, 400), F), "sr": ((), I), "h": ((2, 1, 64), F), "c": ((2, 1, 64), F)}]),
    ("silero_vad_v5", {"input.1": [256, 576]}, VAD5, ["input=1x576,state=2x1x128"],
     [{"input": ((1, 400), F), "sr": ((), I), "state": ((2, 1, 128), F)}]),
]


failures = 0
for name, buckets, ranges, shapes, calls in CASES:
    model = f"{models}/{name}.onnx"
    kw = dict(devices=devices, strategy="threads", input_ranges={k: list(v) for k, v in ranges.items()} or None, shapes=shapes)
    label = f"{name} {' '.join(f'{k}={v}' for k, v in buckets.items())}"
    try:
        with ortfleet.Fleet(model, buckets=buckets, **kw) as bucketed:
            bucketed.start()
            if not bucketed.wait():
                print(f"FAIL {label}: a device failed for another reason than the buckets: {bucketed.status()[0]['error']}")
                failures += 1
                continue
            with ortfleet.Fleet(model, **kw) as plain:
                plain.start()
                assert plain.wait(), plain.status()[0]["error"]
                for call in calls:
                    given = inputs_for(rng, call, ranges)
                    got, want = bucketed.run(0, given), plain.run(0, given)
                    for output, a in want.items():
                        b = got[output]
                        a64, b64 = a.astype(np.float64), b.astype(np.float64)
                        scale = float(np.max(np.abs(a64))) if a.size else 0.0
                        diff = float(np.max(np.abs(a64 - b64))) if a.size and a.shape == b.shape else float("inf")
                        ok = a.shape == b.shape and bool(np.all(np.abs(a64 - b64) <= 1e-2 * max(1.0, scale) + 1e-2 * np.abs(a64)))
                        failures += 0 if ok else 1
                        sizes = {k: v[0] for k, v in call.items()}
                        print(f"{'ok  ' if ok else 'FAIL'} {label}: a call of {sizes}, output {output}: max |diff| {diff:.3g} of {scale:.3g}")
    except ortfleet.Error as e:
        print(f"ok   {label}: refused: {str(e)[:220]}")
print("corpus buckets:", "ok" if failures == 0 else f"{failures} silently different")
sys.exit(1 if failures else 0)
