"""ortfleet: ONNX Runtime sessions started fast on every GPU of a node, and why start-up is slow.

    import ortfleet
    with ortfleet.Fleet("model.onnx", devices=[0, 1, 2, 3]) as fleet:
        fleet.start().wait()                       # the GIL is released while sessions start
        out = fleet.run(0, {"input": batch})       # numpy arrays, or torch/CuPy tensors (DLPack)

The diagnostics return what the command line prints with --json: ortfleet.doctor(),
ortfleet.bench(model), ortfleet.profile(model), ortfleet.tune(model); `python -m ortfleet ...`
runs the command line itself.
"""
from ._ortfleet import (  # noqa: F401  (the public API)
    DeviceTensor,
    Error,
    Fleet,
    bench,
    doctor,
    load_runtime,
    profile,
    synth_mlp,
    synth_resnet,
    tune,
)

__all__ = ["DeviceTensor", "Error", "Fleet", "bench", "doctor", "load_runtime", "profile", "synth_mlp",
           "synth_resnet", "tune"]
__version__ = "0.1.0"
