"""ortfleet: ONNX Runtime sessions started fast on every GPU of a node, and why start-up is slow.

    import ortfleet, numpy as np
    with ortfleet.Fleet("model.onnx", devices="all") as fleet:   # every GPU, else the CPU
        fleet.start().wait()                       # the GIL is released while sessions start; Ctrl-C stops the wait
        out = fleet.run(0, {"input": batch})       # numpy arrays, or torch/CuPy tensors (DLPack)

`fleet.run(0, ...)` runs on GPU 0, or, on a fleet without GPUs, on its first device (the CPU);
`fleet.devices` lists them. A job that will start fleets calls ortfleet.prewarm() first: the workers
load ONNX Runtime and the CUDA EP and initialise their GPUs while the job imports torch and loads
data, and later fleets start on them. ortfleet.Pool() is the same, explicit; Fleet(model,
pool="/run/user/1000/ortfleet/pool.sock") uses the pool of an `ortfleet serve` daemon.

Failures raise ortfleet.Error; ortfleet's log goes to the logger "ortfleet" of the logging module
(warnings on stderr unless logging is configured); a warm pool a start leaves on the node for the
next job is said once, as an ortfleet.LeftBehindWarning.

The diagnostics return what the command line prints with --json: ortfleet.doctor(),
ortfleet.bench(model), ortfleet.profile(model), ortfleet.tune(model); `python -m ortfleet ...`
runs the command line itself.
"""


def _share_the_cxx_runtime():
    """Puts libstdc++ into the process's global symbol scope before the extension loads.

    Without it, ONNX Runtime 1.29's CreateEnv crashed (SIGSEGV in its hardware discovery's
    std::regex, reading a wrong locale facet) in a Python process that imported ortfleet before
    anything that loads libstdc++ globally (numpy, torch, onnxruntime). Measured on the GPU machine,
    where the extension carries its own static libstdc++: docs/results/2026-11-22/1xH100-python-crash.
    """
    import ctypes
    import os

    try:
        ctypes.CDLL("libstdc++.so.6", mode=os.RTLD_GLOBAL)
    except OSError:
        pass  # no shared libstdc++ on this system: nothing to share


_share_the_cxx_runtime()

from ._ortfleet import (  # noqa: E402,F401  (the public API)
    DeviceTensor,
    Error,
    Fleet,
    LeftBehindWarning,
    Pool,
    RunFuture,
    _forget_prewarmed,
    bench,
    default_pool_socket,
    doctor,
    load_runtime,
    pool_status,
    pool_stop,
    prewarm,
    profile,
    synth_mlp,
    synth_nodes,
    synth_resnet,
    synth_segmenter,
    tune,
)

from ._calls import checked as _checked  # noqa: E402

# Paths as os.PathLike, unknown keywords named with the closest one, wrong types in one line (_calls.py).
_checked(globals(),
         ["bench", "default_pool_socket", "doctor", "load_runtime", "pool_status", "pool_stop", "prewarm", "profile", "synth_mlp",
          "synth_nodes", "synth_resnet", "synth_segmenter", "tune"],
         ["Fleet", "Pool", "RunFuture"])

__all__ = ["DeviceTensor", "Error", "Fleet", "LeftBehindWarning", "Pool", "RunFuture", "bench", "default_pool_socket", "doctor",
           "load_runtime", "pool_status", "pool_stop", "prewarm", "profile", "synth_mlp", "synth_nodes", "synth_resnet",
           "synth_segmenter", "tune"]
__version__ = "0.1.0"
# At exit the prewarmed pool's workers stop and ortfleet's last log records are handed on: the
# extension registers that itself, so that this namespace holds only the public API.
