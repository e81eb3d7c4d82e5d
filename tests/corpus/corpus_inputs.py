"""What the corpus scripts share: whether they can run here, each model's value ranges and made-up inputs."""
import os
import sys

import numpy as np

F, I = np.float32, np.int64
VAD4 = {"sr": (16000, 16000), "h": (0, 0), "c": (0, 0)}
VAD5 = {"sr": (16000, 16000), "state": (0, 0)}
MEL = {"input": (-32768, 32767)}


def inputs_for(rng, call, ranges):
    """Inputs of `call` (name -> (shape, dtype)), uniform in each input's range (default -1..1)."""
    out = {}
    for name, (shape, dtype) in call.items():
        lo, hi = ranges.get(name, (-1.0, 1.0))
        if np.issubdtype(dtype, np.integer):
            out[name] = rng.integers(int(lo), int(hi) + 1, size=shape).astype(dtype)
        else:
            out[name] = rng.uniform(lo, hi, size=shape).astype(dtype)
    return out


def devices_or_skip(models, device):
    """The devices argument for `device` (cpu, or a GPU number); exits 77 (skip) without the corpus or the GPU."""
    import ortfleet
    if not os.path.exists(f"{models}/silero_vad_v5.onnx"):
        print(f"SKIP: the real-model corpus is not in {models}; run scripts/fetch-real-models.sh", file=sys.stderr)
        sys.exit(77)
    if device == "cpu":
        return "cpu"
    try:
        with ortfleet.Fleet(f"{models}/oww_embedding.onnx", devices=[int(device)], strategy="threads") as probe:
            probe.start()
            probe.wait()
    except ortfleet.Error as e:
        print(f"SKIP: no GPU {device}: {e}", file=sys.stderr)
        sys.exit(77)
    return [int(device)]
