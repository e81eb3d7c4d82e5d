"""GPU memory that each extra ONNX Runtime CUDA session of one model holds, per option variant (issue 23 item 5).

    python3 session_memory.py MODEL.onnx --sessions 4 --shape input=1x3x224x224 [--variant NAME ...]
                              [--runs 20] [--timeout 300] --out FILE.json
    python3 session_memory.py --list                       the variants and what each one changes

Runs on the GPU machine (source /tmp/ortfleet-device/parts/env.sh first) with the CUDA EP library named by
$ORTFLEET_CUDA_EP, registered as a plugin EP library, through one of two engines:
  capi    ONNX Runtime's C library through ctypes (ortfleet's 1.29: --ort-lib, $ORTFLEET_ORT_LIB or
          $ORTFLEET_ORT_ROOT/lib): RegisterExecutionProviderLibrary, GetEpDevices,
          SessionOptionsAppendExecutionProvider_V2, and CreateSharedAllocator for the env_allocator variants;
  python  onnxruntime's Python module (register_execution_provider_library, get_ep_devices,
          SessionOptions.add_provider_for_devices). Its module exports no C API and binds no
          CreateSharedAllocator, so the env_allocator variants with an arena report 'unsupported' there.
--engine auto (the default) takes capi when the library is found.

Each variant runs in a fresh child process, so its memory is measured cleanly and a crash ends only that
variant (the parent records the signal). In the child, N
sessions of the same model are created on GPU 0 one after another; each runs twice on random inputs of the
given shape (dynamic dims not named in --shape are 1), and device memory in use is read after its creation
and after each run with cuMemGetInfo from libcuda.so.1, in the primary context that ONNX Runtime's CUDA
runtime also uses. Then the last session runs --runs more times (p50/p90 ms), so a variant that saves
memory but slows runs shows it. The weights (initializer bytes, from onnx) are reported next to the per
session figure: sessions here do not share weights, so each one holds its own copy of them.

Per variant: used_first_mb (memory after session 1 over the baseline taken after the EP registration),
extra_per_session_mb (mean growth per further session), its create / run parts, overhead_mb (extra minus
the weights), p50_ms, and every reading. A variant the runtime refuses is recorded as
'unsupported: why' and the next one runs. The JSON is rewritten after every variant."""
import argparse
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SHRINK_KEY = "memory.enable_memory_arena_shrinkage"
ENV_ALLOCATORS_KEY = "session.use_env_allocators"
CUDA_EP = "CUDAExecutionProvider"
EXIT_UNSUPPORTED = 3

# Provider-option names are those CUDAExecutionProviderInfo::FromProviderOptions accepts (the strings in
# libonnxruntime_providers_cuda.so 1.29): an unknown key fails session creation ("Unknown provider option").
VARIANTS = {
    "default": dict(doc="ONNX Runtime's defaults: EXHAUSTIVE conv search, cudnn_conv_use_max_workspace=1, "
                        "kNextPowerOfTwo arena, a stream with its own cuBLAS/cuDNN handles per session"),
    "shrink": dict(shrink=True,
                   doc="RunOptions memory.enable_memory_arena_shrinkage=gpu:0 on the second warm-up run and on "
                       "every timed run: the arena frees its unused regions after each run"),
    "same_as_requested": dict(provider={"arena_extend_strategy": "kSameAsRequested"},
                              doc="the arena grows by what is asked, not to the next power of two"),
    "no_max_workspace": dict(provider={"cudnn_conv_use_max_workspace": "0"},
                             doc="cuDNN picks conv algorithms within a 32 MB workspace"),
    "heuristic": dict(provider={"cudnn_conv_algo_search": "HEURISTIC"},
                      doc="cuDNN's heuristic instead of the exhaustive benchmark (comparison)"),
    "unified_stream": dict(provider={"use_ep_level_unified_stream": "1"},
                           doc="one EP-level stream per session whose CudaStream reuses the per-thread "
                               "context's cuBLAS/cuDNN handles instead of creating its own"),
    "shared_stream": dict(stream="shared",
                          doc="every session gets the same user compute stream (has_user_compute_stream=1, "
                              "user_compute_stream=<cuStreamCreate pointer>); implies the EP-level stream"),
    "env_allocator_raw": dict(env="raw",
                              doc="session.use_env_allocators=1 with the environment's default shared allocator "
                                  "for the CUDA ep device (registered with the library: plain cudaMalloc, no arena)"),
    "env_allocator": dict(env="arena",
                          doc="OrtApi::CreateSharedAllocator(env, cuda ep device, DEFAULT, OrtArenaAllocator) "
                              "replaces it with one arena shared by all sessions, plus session.use_env_allocators=1"),
    "env_allocator_shrink": dict(env="arena", shrink=True, doc="env_allocator and shrink together"),
    "env_allocator_stream": dict(env="arena", stream="shared",
                                 doc="env_allocator and shared_stream together: the shared arena is not stream "
                                     "aware, so one stream for all sessions is what keeps concurrent runs safe"),
    "combined": dict(provider={"arena_extend_strategy": "kSameAsRequested", "use_ep_level_unified_stream": "1"},
                     shrink=True, doc="same_as_requested + unified_stream + shrink"),
}
DEFAULT_VARIANTS = ["default", "shrink", "same_as_requested", "no_max_workspace", "heuristic", "unified_stream",
                    "shared_stream", "env_allocator_raw", "env_allocator", "env_allocator_shrink", "env_allocator_stream",
                    "combined"]


class Unsupported(Exception):
    """The runtime does not offer what the variant needs."""


def mb(n):
    return round(n / 1048576.0, 1)


# --- arguments ---------------------------------------------------------------------------------------------

def parse_shapes(items):
    shapes = {}
    for item in items or []:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            name, eq, dims = part.partition("=")
            if not eq or not name or not dims:
                raise argparse.ArgumentTypeError("'%s' is not name=dims (e.g. input=1x3x224x224)" % part)
            try:
                values = [int(d) for d in dims.lower().split("x")]
            except ValueError:
                raise argparse.ArgumentTypeError("'%s' has a dim that is not a whole number" % part)
            if any(v <= 0 for v in values):
                raise argparse.ArgumentTypeError("'%s' has a dim that is not positive" % part)
            shapes[name] = values
    return shapes


def parse_custom(text):
    """custom:NAME:key=value,key=value[,shrink] -> (NAME, spec): provider options of your own."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not parts[1]:
        raise argparse.ArgumentTypeError("'%s': write custom:NAME:key=value,key=value[,shrink]" % text)
    spec = {"provider": {}, "doc": "custom: " + parts[2]}
    for kv in parts[2].split(","):
        kv = kv.strip()
        if kv == "shrink":
            spec["shrink"] = True
        elif "=" in kv:
            key, _, value = kv.partition("=")
            spec["provider"][key.strip()] = value.strip()
        elif kv:
            raise argparse.ArgumentTypeError("'%s' in '%s' is not key=value" % (kv, text))
    return parts[1], spec


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="the .onnx model")
    p.add_argument("--sessions", type=int, default=4, help="sessions of the model per variant (default 4)")
    p.add_argument("--shape", action="append", default=[], help="name=1x3x224x224 (repeat, or comma-separate)")
    p.add_argument("--variant", action="append", default=[],
                   help="a variant (repeat; default all); custom:NAME:key=value,...[,shrink] for your own options")
    p.add_argument("--runs", type=int, default=20, help="timed runs of the last session (default 20)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per variant before it is killed")
    p.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    p.add_argument("--env-arena-option", action="append", default=[],
                   help="key=value for the shared arena's allocator_options (env_allocator variants)")
    p.add_argument("--engine", choices=("auto", "capi", "python"), default="auto",
                   help="capi: ONNX Runtime's C library through ctypes (the runtime ortfleet loads; needed for "
                        "CreateSharedAllocator); python: onnxruntime's Python module; auto: capi when the library "
                        "is found, else python")
    p.add_argument("--ort-lib", help="libonnxruntime.so.1 for --engine capi (default: $ORTFLEET_ORT_LIB, "
                                     "$ORTFLEET_ORT_ROOT/lib, then the checkout's .deps/onnxruntime/lib)")
    p.add_argument("--out", help="JSON results")
    p.add_argument("--list", action="store_true", help="list the variants and exit")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--child-spec", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    return p


def parse_args(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        return args
    if not args.model:
        parser.error("MODEL is required")
    if args.sessions < 2:
        parser.error("--sessions must be at least 2 (the figure is the growth per further session)")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        args.shapes = parse_shapes(args.shape)
    except argparse.ArgumentTypeError as e:
        parser.error(str(e))
    args.specs = {}
    names = args.variant or list(DEFAULT_VARIANTS)
    for name in names:
        if name.startswith("custom:"):
            try:
                cname, spec = parse_custom(name)
            except argparse.ArgumentTypeError as e:
                parser.error(str(e))
            args.specs[cname] = spec
        elif name in VARIANTS:
            args.specs[name] = VARIANTS[name]
        else:
            parser.error("unknown variant '%s' (--list shows them)" % name)
    for kv in args.env_arena_option:
        if "=" not in kv:
            parser.error("--env-arena-option wants key=value, got '%s'" % kv)
    if not args.out and not args.child:
        parser.error("--out FILE.json is required")
    if not args.child:
        found = find_ort_lib(args.ort_lib)
        if args.engine == "capi" and not found:
            parser.error("--engine capi: no libonnxruntime.so.1 found (give --ort-lib, or set ORTFLEET_ORT_LIB "
                         "or ORTFLEET_ORT_ROOT)")
        if args.engine == "auto":
            args.engine = "capi" if found else "python"
        args.ort_lib = found
    return args


# --- the CUDA driver, for readings and a stream ------------------------------------------------------------

class CudaDriver:
    def __init__(self, ordinal):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self._check(self.lib.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        self.dev = dev.value
        ctx = ctypes.c_void_p()
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        self._check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self.ctx = ctx
        name = ctypes.create_string_buffer(256)
        self.lib.cuDeviceGetName(name, 256, dev)
        self.name = name.value.decode(errors="replace")
        version = ctypes.c_int()
        self.lib.cuDriverGetVersion(ctypes.byref(version))
        self.driver_version = version.value
        self.lib.cuMemGetInfo_v2.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]

    @staticmethod
    def _check(rc, what):
        if rc != 0:
            raise RuntimeError("%s failed with CUresult %d" % (what, rc))

    def used(self):
        """Bytes in use on the device (total - free), after the context's work has finished."""
        self.lib.cuCtxSetCurrent(self.ctx)
        self.lib.cuCtxSynchronize()
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self._check(self.lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        self.total = total.value
        return total.value - free.value

    def create_stream(self):
        stream = ctypes.c_void_p()
        self._check(self.lib.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")  # CU_STREAM_NON_BLOCKING
        return stream.value


# --- ONNX Runtime through its C API (ctypes) ---------------------------------------------------------------

# Indices into OrtApi (an append-only table of function pointers), from onnxruntime_c_api.h of 1.29:
# offsetof(OrtApi, X) / sizeof(void*). Every one exists since API version 23, which is what GetApi is asked for.
API_INDEX = dict(
    CreateStatus=0, GetErrorMessage=2, CreateEnv=3, CreateSession=7, Run=9, CreateSessionOptions=10,
    SetSessionLogSeverityLevel=22, SessionGetInputCount=30, SessionGetOutputCount=31, SessionGetInputTypeInfo=33,
    SessionGetInputName=36, SessionGetOutputName=37, CreateRunOptions=39, CreateTensorWithDataAsOrtValue=49,
    CastTypeInfoToTensorInfo=55, GetTensorElementType=60, GetDimensionsCount=61, GetDimensions=62,
    CreateCpuMemoryInfo=69, AllocatorFree=76, GetAllocatorWithDefaultOptions=78, ReleaseStatus=93,
    ReleaseSession=95, ReleaseValue=96, ReleaseTypeInfo=98, ReleaseSessionOptions=100, AddSessionConfigEntry=130,
    AddRunConfigEntry=165, CreateKeyValuePairs=295, AddKeyValuePair=296, GetKeyValue=297,
    RegisterExecutionProviderLibrary=301, GetEpDevices=303, SessionOptionsAppendExecutionProvider_V2=304,
    EpDevice_EpName=312, EpDevice_EpOptions=315, CreateSharedAllocator=375)
ELEMENT_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
                 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}
NUMPY_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
               "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int16)": "int16", "tensor(int8)": "int8",
               "tensor(uint8)": "uint8", "tensor(uint16)": "uint16", "tensor(uint32)": "uint32",
               "tensor(uint64)": "uint64", "tensor(bool)": "bool"}


class OrtCApi:
    """OrtApi through ctypes, from a library that exports OrtGetApiBase."""

    def __init__(self, get_base, library, api_version=23):
        class ApiBase(ctypes.Structure):
            _fields_ = [("GetApi", ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32)),
                        ("GetVersionString", ctypes.CFUNCTYPE(ctypes.c_char_p))]

        self.library = library
        get_base.restype = ctypes.POINTER(ApiBase)
        base = get_base().contents
        self.version = base.GetVersionString().decode()
        api = base.GetApi(api_version)
        if not api:
            raise Unsupported("GetApi(%d) returned NULL (runtime %s)" % (api_version, self.version))
        self.table = ctypes.cast(api, ctypes.POINTER(ctypes.c_void_p))
        vp, cp, sz, i64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64
        P = ctypes.POINTER
        f = self._fn
        self.GetErrorMessage = f("GetErrorMessage", cp, vp)
        self.ReleaseStatus = f("ReleaseStatus", None, vp)
        self.CreateEnv = f("CreateEnv", vp, ctypes.c_int, cp, P(vp))
        self.RegisterExecutionProviderLibrary = f("RegisterExecutionProviderLibrary", vp, vp, cp, cp)
        self.CreateKeyValuePairs = f("CreateKeyValuePairs", None, P(vp))
        self.AddKeyValuePair = f("AddKeyValuePair", None, vp, cp, cp)
        self.GetKeyValue = f("GetKeyValue", cp, vp, cp)
        self.GetEpDevices = f("GetEpDevices", vp, vp, P(P(vp)), P(sz))
        self.EpDevice_EpName = f("EpDevice_EpName", cp, vp)
        self.EpDevice_EpOptions = f("EpDevice_EpOptions", vp, vp)
        self.CreateSharedAllocator = f("CreateSharedAllocator", vp, vp, vp, ctypes.c_int, ctypes.c_int, vp, P(vp))
        self.CreateSessionOptions = f("CreateSessionOptions", vp, P(vp))
        self.SetSessionLogSeverityLevel = f("SetSessionLogSeverityLevel", vp, vp, ctypes.c_int)
        self.AddSessionConfigEntry = f("AddSessionConfigEntry", vp, vp, cp, cp)
        self.AppendExecutionProvider_V2 = f("SessionOptionsAppendExecutionProvider_V2", vp, vp, vp, P(vp), sz,
                                            P(cp), P(cp), sz)
        self.ReleaseSessionOptions = f("ReleaseSessionOptions", None, vp)
        self.CreateSession = f("CreateSession", vp, vp, cp, vp, P(vp))
        self.SessionGetInputCount = f("SessionGetInputCount", vp, vp, P(sz))
        self.SessionGetOutputCount = f("SessionGetOutputCount", vp, vp, P(sz))
        self.SessionGetInputName = f("SessionGetInputName", vp, vp, sz, vp, P(vp))
        self.SessionGetOutputName = f("SessionGetOutputName", vp, vp, sz, vp, P(vp))
        self.GetAllocatorWithDefaultOptions = f("GetAllocatorWithDefaultOptions", vp, P(vp))
        self.AllocatorFree = f("AllocatorFree", vp, vp, vp)
        self.SessionGetInputTypeInfo = f("SessionGetInputTypeInfo", vp, vp, sz, P(vp))
        self.CastTypeInfoToTensorInfo = f("CastTypeInfoToTensorInfo", vp, vp, P(vp))
        self.GetTensorElementType = f("GetTensorElementType", vp, vp, P(ctypes.c_int))
        self.GetDimensionsCount = f("GetDimensionsCount", vp, vp, P(sz))
        self.GetDimensions = f("GetDimensions", vp, vp, P(i64), sz)
        self.ReleaseTypeInfo = f("ReleaseTypeInfo", None, vp)
        self.CreateCpuMemoryInfo = f("CreateCpuMemoryInfo", vp, ctypes.c_int, ctypes.c_int, P(vp))
        self.CreateTensorWithDataAsOrtValue = f("CreateTensorWithDataAsOrtValue", vp, vp, vp, sz, P(i64), sz,
                                                ctypes.c_int, P(vp))
        self.ReleaseValue = f("ReleaseValue", None, vp)
        self.CreateRunOptions = f("CreateRunOptions", vp, P(vp))
        self.AddRunConfigEntry = f("AddRunConfigEntry", vp, vp, cp, cp)
        self.Run = f("Run", vp, vp, vp, P(cp), P(vp), sz, P(cp), sz, P(vp))

    @classmethod
    def from_library(cls, path):
        lib = ctypes.CDLL(path)
        return cls(lib.OrtGetApiBase, path)

    @classmethod
    def from_python(cls, ort):
        """The C API of the ONNX Runtime that Python already loaded, if a library of the package exports it."""
        pkg = os.path.dirname(os.path.abspath(ort.__file__))
        mapped, tried = [], []
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                path = fields[5].strip() if len(fields) == 6 else ""
                is_so = path.endswith(".so") or ".so." in os.path.basename(path)
                if path.startswith(pkg + os.sep) and is_so and path not in mapped:
                    mapped.append(path)
        for path in mapped:
            try:
                lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
                return cls(lib.OrtGetApiBase, path)
            except (OSError, AttributeError):
                tried.append(os.path.basename(path))
        raise Unsupported("onnxruntime %s's Python module has no create_shared_allocator, and none of its loaded "
                          "libraries (%s) exports OrtGetApiBase (python/version_script.lds keeps only "
                          "PyInit_onnxruntime_pybind11_state): use --engine capi" % (ort.__version__, ", ".join(tried)))

    def _fn(self, name, restype, *argtypes):
        return ctypes.CFUNCTYPE(restype, *argtypes)(self.table[API_INDEX[name]])

    def check(self, status, what):
        if status:
            message = self.GetErrorMessage(status).decode(errors="replace")
            self.ReleaseStatus(status)
            raise RuntimeError("%s: %s" % (what, message))

    def env(self, level=3):
        env = ctypes.c_void_p()
        self.check(self.CreateEnv(level, b"session_memory", ctypes.byref(env)), "CreateEnv")
        return env  # kept for the process: releasing it would drop the singleton's reference count

    def cuda_ep_device(self, env, ordinal):
        devices = ctypes.POINTER(ctypes.c_void_p)()
        count = ctypes.c_size_t()
        self.check(self.GetEpDevices(env, ctypes.byref(devices), ctypes.byref(count)), "GetEpDevices")
        names = []
        for i in range(count.value):
            dev = devices[i]
            name = (self.EpDevice_EpName(dev) or b"").decode()
            names.append(name)
            if name != CUDA_EP:
                continue
            options = self.EpDevice_EpOptions(dev)
            value = self.GetKeyValue(options, b"device_id") if options else None
            if value is None or int(value) == ordinal:
                return dev
        raise Unsupported("the env lists no %s device %d (it lists %s)" % (CUDA_EP, ordinal, names))

    def create_shared_arena(self, env, ep_device, options):
        kvps = None
        if options:
            kv = ctypes.c_void_p()
            self.CreateKeyValuePairs(ctypes.byref(kv))
            for key, value in options.items():
                self.AddKeyValuePair(kv, key.encode(), value.encode())
            kvps = kv
        allocator = ctypes.c_void_p()
        # mem_type 0 = OrtDeviceMemoryType_DEFAULT, allocator_type 1 = OrtArenaAllocator
        status = self.CreateSharedAllocator(env, ep_device, 0, 1, kvps, ctypes.byref(allocator))
        if status:
            message = self.GetErrorMessage(status).decode(errors="replace")
            self.ReleaseStatus(status)
            raise Unsupported("CreateSharedAllocator(OrtArenaAllocator) failed: " + message)
        return allocator.value


def find_ort_lib(given):
    candidates = [given, os.environ.get("ORTFLEET_ORT_LIB")]
    if os.environ.get("ORTFLEET_ORT_ROOT"):
        candidates.append(os.path.join(os.environ["ORTFLEET_ORT_ROOT"], "lib"))
    candidates.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".deps", "onnxruntime", "lib"))
    for c in candidates:
        if not c:
            continue
        if os.path.isdir(c):
            c = os.path.join(c, "libonnxruntime.so.1")
        if os.path.exists(c):
            return os.path.abspath(c)
    return None


# --- engines: the same steps through onnxruntime's Python API or through the C library ---------------------

class PythonEngine:
    name = "python"

    def __init__(self, library, ordinal):
        import onnxruntime as ort
        self.ort = ort
        self.version = ort.__version__
        for fn in ("register_execution_provider_library", "get_ep_devices"):
            if not hasattr(ort, fn):
                raise Unsupported("onnxruntime %s has no %s" % (ort.__version__, fn))
        ort.register_execution_provider_library("session_memory.cuda", library)
        self.device = None
        for d in ort.get_ep_devices():
            if d.ep_name == CUDA_EP and str(d.ep_options.get("device_id", ordinal)) == str(ordinal):
                self.device = d
                break
        if self.device is None:
            raise RuntimeError("the CUDA EP library offers no device %d" % ordinal)
        self.plain = ort.RunOptions()
        self.shrinking = ort.RunOptions()
        self.shrinking.add_run_config_entry(SHRINK_KEY, "gpu:%d" % ordinal)

    def shared_arena(self, options):
        ort = self.ort
        for owner in (ort, getattr(getattr(ort, "capi", None), "_pybind_state", None)):
            fn = getattr(owner, "create_shared_allocator", None) if owner is not None else None
            if fn is None:
                continue
            mem_type = getattr(getattr(ort, "OrtDeviceMemoryType", None), "DEFAULT", 0)
            alloc_type = getattr(getattr(ort, "OrtAllocatorType", None), "ORT_ARENA_ALLOCATOR", 1)
            errors = []
            for call in ((self.device, mem_type, alloc_type, options), (self.device, mem_type, alloc_type, options or None)):
                try:
                    fn(*call)
                    return "python %s.create_shared_allocator" % owner.__name__
                except TypeError as e:
                    errors.append(str(e))
                except Exception as e:
                    raise Unsupported("create_shared_allocator failed: %s" % e)
            raise Unsupported("create_shared_allocator's signature did not fit: " + "; ".join(errors))
        capi = OrtCApi.from_python(ort)  # raises Unsupported on the official wheels
        self._env = capi.env()
        capi.create_shared_arena(self._env, capi.cuda_ep_device(self._env, int(self.device.ep_options.get(
            "device_id", 0))), options)
        self._capi = capi
        return "the C API of %s" % os.path.basename(capi.library)

    def session(self, model, provider, config):
        so = self.ort.SessionOptions()
        so.log_severity_level = 3
        for k, v in config.items():
            so.add_session_config_entry(k, v)
        so.add_provider_for_devices([self.device], provider)
        sess = self.ort.InferenceSession(model, sess_options=so)
        if CUDA_EP not in sess.get_providers():
            raise RuntimeError("the session's providers are %s" % sess.get_providers())
        return PythonSession(self, sess)


class PythonSession:
    def __init__(self, engine, sess):
        self.engine, self.sess = engine, sess
        self.inputs = [(i.name, NUMPY_TYPES.get(i.type), list(i.shape or [])) for i in sess.get_inputs()]

    def run(self, feeds, shrink):
        self.sess.run(None, feeds, self.engine.shrinking if shrink else self.engine.plain)


class CApiEngine:
    name = "capi"

    def __init__(self, library, ordinal, ort_lib):
        self.api = api = OrtCApi.from_library(ort_lib)
        self.version = api.version
        self.env = api.env()
        api.check(api.RegisterExecutionProviderLibrary(self.env, b"session_memory.cuda", library.encode()),
                  "RegisterExecutionProviderLibrary")
        self.device = api.cuda_ep_device(self.env, ordinal)
        self.allocator = ctypes.c_void_p()
        api.check(api.GetAllocatorWithDefaultOptions(ctypes.byref(self.allocator)), "GetAllocatorWithDefaultOptions")
        self.cpu = ctypes.c_void_p()
        api.check(api.CreateCpuMemoryInfo(0, 0, ctypes.byref(self.cpu)), "CreateCpuMemoryInfo")
        self.plain = ctypes.c_void_p()
        api.check(api.CreateRunOptions(ctypes.byref(self.plain)), "CreateRunOptions")
        self.shrinking = ctypes.c_void_p()
        api.check(api.CreateRunOptions(ctypes.byref(self.shrinking)), "CreateRunOptions")
        api.check(api.AddRunConfigEntry(self.shrinking, SHRINK_KEY.encode(), ("gpu:%d" % ordinal).encode()),
                  "AddRunConfigEntry")

    def shared_arena(self, options):
        self.api.create_shared_arena(self.env, self.device, options)
        return "OrtApi::CreateSharedAllocator of %s" % os.path.basename(self.api.library)

    def _name(self, getter, sess, i):
        api, raw = self.api, ctypes.c_void_p()
        api.check(getter(sess, i, self.allocator, ctypes.byref(raw)), "session name")
        name = ctypes.string_at(raw.value).decode()
        api.AllocatorFree(self.allocator, raw)
        return name

    def session(self, model, provider, config):
        api = self.api
        so = ctypes.c_void_p()
        api.check(api.CreateSessionOptions(ctypes.byref(so)), "CreateSessionOptions")
        try:
            api.check(api.SetSessionLogSeverityLevel(so, 3), "SetSessionLogSeverityLevel")
            for k, v in config.items():
                api.check(api.AddSessionConfigEntry(so, k.encode(), v.encode()), "AddSessionConfigEntry")
            keys = (ctypes.c_char_p * max(1, len(provider)))(*[k.encode() for k in provider])
            vals = (ctypes.c_char_p * max(1, len(provider)))(*[v.encode() for v in provider.values()])
            devices = (ctypes.c_void_p * 1)(self.device)
            api.check(api.AppendExecutionProvider_V2(so, self.env, devices, 1, keys, vals, len(provider)),
                      "SessionOptionsAppendExecutionProvider_V2")
            sess = ctypes.c_void_p()
            api.check(api.CreateSession(self.env, model.encode(), so, ctypes.byref(sess)), "CreateSession")
        finally:
            api.ReleaseSessionOptions(so)
        return CApiSession(self, sess)


class CApiSession:
    def __init__(self, engine, sess):
        api = engine.api
        self.engine, self.sess = engine, sess
        n_in, n_out = ctypes.c_size_t(), ctypes.c_size_t()
        api.check(api.SessionGetInputCount(sess, ctypes.byref(n_in)), "SessionGetInputCount")
        api.check(api.SessionGetOutputCount(sess, ctypes.byref(n_out)), "SessionGetOutputCount")
        self.inputs = []
        for i in range(n_in.value):
            name = engine._name(api.SessionGetInputName, sess, i)
            info, tensor = ctypes.c_void_p(), ctypes.c_void_p()
            api.check(api.SessionGetInputTypeInfo(sess, i, ctypes.byref(info)), "SessionGetInputTypeInfo")
            kind, dims = None, []
            api.check(api.CastTypeInfoToTensorInfo(info, ctypes.byref(tensor)), "CastTypeInfoToTensorInfo")
            if tensor.value:
                elem, count = ctypes.c_int(), ctypes.c_size_t()
                api.check(api.GetTensorElementType(tensor, ctypes.byref(elem)), "GetTensorElementType")
                api.check(api.GetDimensionsCount(tensor, ctypes.byref(count)), "GetDimensionsCount")
                values = (ctypes.c_int64 * max(1, count.value))()
                api.check(api.GetDimensions(tensor, values, count.value), "GetDimensions")
                kind = ELEMENT_TYPES.get(elem.value)
                dims = [d if d > 0 else None for d in values[:count.value]]
            api.ReleaseTypeInfo(info)
            self.inputs.append((name, kind, dims))
        self.outputs = [engine._name(api.SessionGetOutputName, sess, i) for i in range(n_out.value)]
        self.prepared = None

    def _prepare(self, feeds):
        api, engine = self.engine.api, self.engine
        reverse = {v: k for k, v in ELEMENT_TYPES.items()}
        names, values, keep = [], [], []
        for name, _, _ in self.inputs:
            arr = feeds[name]
            shape = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
            value = ctypes.c_void_p()
            api.check(api.CreateTensorWithDataAsOrtValue(engine.cpu, arr.ctypes.data, arr.nbytes, shape, arr.ndim,
                                                         reverse[str(arr.dtype)], ctypes.byref(value)),
                      "CreateTensorWithDataAsOrtValue")
            names.append(name.encode())
            values.append(value.value)
            keep.append((arr, shape))
        n = len(names)
        self.prepared = ((ctypes.c_char_p * max(1, n))(*names), (ctypes.c_void_p * max(1, n))(*values), n,
                         (ctypes.c_char_p * max(1, len(self.outputs)))(*[o.encode() for o in self.outputs]), keep)

    def run(self, feeds, shrink):
        api, engine = self.engine.api, self.engine
        if self.prepared is None:
            self._prepare(feeds)
        in_names, in_values, n, out_names, _ = self.prepared
        outs = (ctypes.c_void_p * max(1, len(self.outputs)))()
        api.check(api.Run(self.sess, engine.shrinking if shrink else engine.plain, in_names, in_values, n, out_names,
                          len(self.outputs), outs), "Run")
        for i in range(len(self.outputs)):
            if outs[i]:
                api.ReleaseValue(outs[i])


# --- the child: one variant --------------------------------------------------------------------------------

def make_feeds(np, inputs, shapes):
    rng = np.random.default_rng(0)
    feeds = {}
    for name, kind, dims in inputs:
        if name in shapes:
            shape = shapes[name]
        else:
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in dims]
        if kind is None:
            raise Unsupported("input %s is of a type this script does not fill" % name)
        if kind == "bool":
            arr = rng.random(shape) > 0.5
        elif kind.startswith(("int", "uint")):
            arr = rng.integers(0, 2, size=shape).astype(kind)
        else:
            arr = rng.standard_normal(shape).astype(kind)
        feeds[name] = np.ascontiguousarray(arr)
    return feeds


def percentile(values, q):
    s = sorted(values)
    if not s:
        return None
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def run_child(args):
    name = args.child
    spec = json.loads(args.child_spec)
    out = {"variant": name, "doc": spec.get("doc", ""), "status": "failed"}

    def write(status, **extra):
        out.update(extra)
        out["status"] = status
        with open(args.result, "w") as f:
            json.dump(out, f, indent=1)

    cuda = CudaDriver(args.device)
    out["gpu"] = cuda.name
    out["driver_version"] = cuda.driver_version
    used_at_start = cuda.used()
    import numpy as np

    library = os.environ.get("ORTFLEET_CUDA_EP", "")
    if os.path.isdir(library):
        library = os.path.join(library, "libonnxruntime_providers_cuda.so")
    if not library or not os.path.exists(library):
        write("failed", error="set ORTFLEET_CUDA_EP to libonnxruntime_providers_cuda.so (got '%s')" % library)
        return 1
    out["cuda_ep"] = library
    t = time.perf_counter()
    try:
        if args.engine == "capi":
            engine = CApiEngine(library, args.device, args.ort_lib)
        else:
            engine = PythonEngine(library, args.device)
    except Unsupported as e:
        write("unsupported", reason=str(e))
        return EXIT_UNSUPPORTED
    out["engine"] = engine.name
    out["onnxruntime"] = engine.version
    out["register_ms"] = round((time.perf_counter() - t) * 1000, 1)

    provider = dict(spec.get("provider", {}))
    config = {}
    shrink = bool(spec.get("shrink"))
    notes = []
    try:
        if spec.get("stream") == "shared":
            try:
                ptr = cuda.create_stream()
                notes.append("user stream from cuStreamCreate")
            except Exception as e:  # fall back to torch's stream pointer
                import torch
                ptr = torch.cuda.Stream(device=args.device).cuda_stream
                notes.append("user stream from torch (cuStreamCreate failed: %s)" % e)
            provider.update({"has_user_compute_stream": "1", "user_compute_stream": str(ptr)})
        if spec.get("env") in ("raw", "arena"):
            config[ENV_ALLOCATORS_KEY] = "1"
        if spec.get("env") == "arena":
            options = dict(kv.split("=", 1) for kv in args.env_arena_option)
            notes.append("shared arena made by " + engine.shared_arena(options))
    except Unsupported as e:
        write("unsupported", reason=str(e), notes=notes)
        return EXIT_UNSUPPORTED
    out["provider_options"] = provider
    out["session_config"] = config
    out["shrink"] = shrink
    out["notes"] = notes

    baseline = cuda.used()
    out["baseline_mb"] = mb(baseline)
    out["context_and_registration_mb"] = mb(baseline - used_at_start)

    sessions, readings = [], []
    feeds = None
    for i in range(args.sessions):
        t = time.perf_counter()
        try:
            sess = engine.session(args.model, provider, config)
        except Exception as e:
            if i == 0:
                write("unsupported", reason="session creation refused: %s" % str(e).strip().splitlines()[-1][:400],
                      notes=notes)
                return EXIT_UNSUPPORTED
            raise
        create_ms = (time.perf_counter() - t) * 1000
        r = {"session": i + 1, "create_ms": round(create_ms, 1), "after_create_mb": mb(cuda.used() - baseline)}
        if feeds is None:
            try:
                feeds = make_feeds(np, sess.inputs, args.shapes)
            except Unsupported as e:
                write("unsupported", reason=str(e))
                return EXIT_UNSUPPORTED
            out["inputs"] = {k: list(v.shape) for k, v in feeds.items()}
        t = time.perf_counter()
        sess.run(feeds, False)
        r["run1_ms"] = round((time.perf_counter() - t) * 1000, 1)
        r["after_run1_mb"] = mb(cuda.used() - baseline)
        t = time.perf_counter()
        sess.run(feeds, shrink)
        r["run2_ms"] = round((time.perf_counter() - t) * 1000, 1)
        r["after_run2_mb"] = mb(cuda.used() - baseline)
        readings.append(r)
        sessions.append(sess)
        print("[%s] session %d: create %.0f ms, run1 %.0f ms; in use over baseline: %.1f MB after create, %.1f MB "
              "after run 1, %.1f MB after run 2" % (name, i + 1, create_ms, r["run1_ms"], r["after_create_mb"],
                                                   r["after_run1_mb"], r["after_run2_mb"]), flush=True)
    out["readings"] = readings
    n = len(readings)
    first = readings[0]["after_run2_mb"]
    last = readings[-1]["after_run2_mb"]
    out["used_first_mb"] = first
    out["used_all_mb"] = last
    out["extra_per_session_mb"] = round((last - first) / (n - 1), 1)
    creates = [readings[k]["after_create_mb"] - readings[k - 1]["after_run2_mb"] for k in range(1, n)]
    runs = [readings[k]["after_run2_mb"] - readings[k]["after_create_mb"] for k in range(1, n)]
    out["extra_create_mb"] = round(statistics.mean(creates), 1)
    out["extra_run_mb"] = round(statistics.mean(runs), 1)
    if args.weights_bytes:
        out["overhead_mb"] = round(out["extra_per_session_mb"] - mb(args.weights_bytes), 1)
        out["overhead_pct_of_weights"] = round(100.0 * out["overhead_mb"] / mb(args.weights_bytes), 1)

    last_sess = sessions[-1]
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        last_sess.run(feeds, shrink)
        times.append((time.perf_counter() - t) * 1000)
    out["p50_ms"] = round(statistics.median(times), 3)
    out["p90_ms"] = round(percentile(times, 0.9), 3)
    out["used_after_timing_mb"] = mb(cuda.used() - baseline)
    print("[%s] first %.1f MB, +%.1f MB per further session (create %.1f, run %.1f), p50 %.2f ms" %
          (name, first, out["extra_per_session_mb"], out["extra_create_mb"], out["extra_run_mb"], out["p50_ms"]),
          flush=True)
    write("ok")
    return 0


# --- the parent ----------------------------------------------------------------------------------------------

def weights_bytes(model):
    try:
        import onnx
        from onnx import helper
    except ImportError:
        return None, "onnx is not installed"
    try:
        m = onnx.load(model, load_external_data=False)
    except Exception as e:
        return None, "onnx could not read the model: %s" % e
    total = 0
    for t in m.graph.initializer:
        count = 1
        for d in t.dims:
            count *= d
        try:
            itemsize = helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        except Exception:
            itemsize = len(t.raw_data) // count if count and t.raw_data else 4
        total += count * itemsize
    return total, None


def run_variant(args, name, spec):
    fd, result = tempfile.mkstemp(prefix="session_memory_", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), args.model, "--child", name, "--child-spec", json.dumps(spec),
           "--result", result, "--sessions", str(args.sessions), "--runs", str(args.runs),
           "--device", str(args.device), "--weights-bytes", str(args.weights_bytes or 0), "--engine", args.engine]
    if args.ort_lib:
        cmd += ["--ort-lib", args.ort_lib]
    for s in args.shape:
        cmd += ["--shape", s]
    for kv in args.env_arena_option:
        cmd += ["--env-arena-option", kv]
    tail = []
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                            start_new_session=True)
    timed_out = []

    def kill():
        timed_out.append(True)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass

    timer = threading.Timer(args.timeout, kill)
    timer.start()
    try:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            tail.append(line.rstrip("\n"))
            del tail[:-30]
        rc = proc.wait()
    finally:
        timer.cancel()
    record = {}
    try:
        with open(result) as f:
            record = json.load(f)
    except (OSError, ValueError):
        pass
    finally:
        try:
            os.unlink(result)
        except OSError:
            pass
    record.setdefault("variant", name)
    record.setdefault("doc", spec.get("doc", ""))
    record["wall_s"] = round(time.monotonic() - start, 1)
    if timed_out:
        record["status"] = "timeout"
        record["error"] = "killed after %.0f s" % args.timeout
    elif rc != 0 and record.get("status") == "ok":
        record["exit_code"] = rc  # the figures were written; the process failed afterwards (teardown)
    elif rc < 0:
        record["status"] = "crashed"
        try:
            record["signal"] = signal.Signals(-rc).name
        except ValueError:
            record["signal"] = "signal %d" % -rc
        record["error"] = "child ended by %s" % record["signal"]
    elif rc == EXIT_UNSUPPORTED:
        record["status"] = "unsupported"
        print("[%s] unsupported: %s" % (name, record.get("reason", "?")), flush=True)
    elif rc != 0:
        record["status"] = "failed"
        record["exit_code"] = rc
    if record["status"] not in ("ok", "unsupported"):
        record["output_tail"] = tail
        if tail and "error" not in record:
            record["error"] = tail[-1][:300]
    return record


def summary(results):
    rows = [("variant", "status", "first MB", "extra/sess MB", "create", "run", "over weights", "p50 ms", "note")]
    for name, r in results.items():
        note = r.get("reason") or r.get("error") or "; ".join(r.get("notes", []))
        rows.append((name, r.get("status", "?"), str(r.get("used_first_mb", "")), str(r.get("extra_per_session_mb", "")),
                     str(r.get("extra_create_mb", "")), str(r.get("extra_run_mb", "")), str(r.get("overhead_mb", "")),
                     str(r.get("p50_ms", "")), (note or "")[:90]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        lines.append("  ".join(row[i].ljust(widths[i]) for i in range(len(widths))) + "  " + row[-1])
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # --weights-bytes is internal (parent -> child); strip it before the public parser sees it.
    weights = None
    if "--weights-bytes" in argv:
        i = argv.index("--weights-bytes")
        weights = int(argv[i + 1]) or None
        argv = argv[:i] + argv[i + 2:]
    args = parse_args(argv)
    if args.list:
        for name in DEFAULT_VARIANTS:
            print("%-22s %s" % (name, VARIANTS[name]["doc"]))
        return 0
    if args.child:
        args.weights_bytes = weights
        rc = run_child(args)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)  # skip interpreter teardown: sessions and the CUDA context die with the process

    args.model = os.path.abspath(args.model)
    args.weights_bytes, why = weights_bytes(args.model)
    doc = {"model": os.path.abspath(args.model), "sessions": args.sessions, "shapes": args.shapes,
           "runs": args.runs, "engine": args.engine, "ort_lib": args.ort_lib if args.engine == "capi" else None,
           "weights_mb": mb(args.weights_bytes) if args.weights_bytes else None,
           "weights_note": why, "cuda_ep": os.environ.get("ORTFLEET_CUDA_EP"), "python": sys.version.split()[0],
           "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "variants": {}}
    print("model %s: weights %s MB; %d sessions per variant; engine %s%s; variants: %s" %
          (args.model, doc["weights_mb"], args.sessions, args.engine,
           " (%s)" % args.ort_lib if args.engine == "capi" else "", ", ".join(args.specs)), flush=True)

    def save():
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.out)

    for name, spec in args.specs.items():
        print("=== %s: %s" % (name, spec.get("doc", "")), flush=True)
        record = run_variant(args, name, spec)
        doc["variants"][name] = record
        for key in ("gpu", "onnxruntime", "driver_version"):
            if key in record and key not in doc:
                doc[key] = record[key]
        save()
    doc["summary"] = summary(doc["variants"]).splitlines()
    save()
    print()
    print("\n".join(doc["summary"]))
    print("results: %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
