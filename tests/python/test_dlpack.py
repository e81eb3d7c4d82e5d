"""DLPack both ways, checked against the published ABI (dlpack.h) with ctypes, without a GPU.

As a consumer, a Fleet asks __dlpack_device__ first, then __dlpack__(stream=..., max_version=(1, 0)),
falls back to __dlpack__(stream=...) for producers from before DLPack 1.0, makes a CUDA tensor's
device current for torch and CuPy while they export it, marks the capsule used and hands the tensor
back (its deleter) after the run. As a producer, DeviceTensor.__dlpack__ takes the array API's
keywords and gives a versioned capsule when max_version asks for one.
"""
import ctypes
import sys
import types

import numpy as np
import pytest

import ortfleet
from ortfleet import _ortfleet

SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}


# --- dlpack.h -----------------------------------------------------------------------------------
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VersionedDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VersionedDeleter), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


class DLManagedTensor(ctypes.Structure):
    pass


LegacyDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", LegacyDeleter)]

READ_ONLY = 1

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

VERSIONED_NAME = b"dltensor_versioned"  # capsule names must outlive their capsules


def capsule_name(capsule):
    return _api.PyCapsule_GetName(capsule).decode()


class VersionedProducer:
    """A DLPack 1.x producer over a float32 numpy array, written from dlpack.h: it records how it is
    called and when its tensor is handed back."""

    def __init__(self, array, major=1, flags=0, device=(1, 0)):
        self.array = np.ascontiguousarray(array, dtype=np.float32)
        self.major, self.flags, self.device = major, flags, device
        self.calls = []
        self.deleted = 0
        self.capsule = None

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append({"stream": stream, "max_version": max_version})
        self._shape = (ctypes.c_int64 * self.array.ndim)(*self.array.shape)
        self._strides = (ctypes.c_int64 * self.array.ndim)(*(s // self.array.itemsize for s in self.array.strides))
        self._deleter = VersionedDeleter(self._delete)
        self.managed = DLManagedTensorVersioned(
            version=DLPackVersion(self.major, 0), manager_ctx=None, deleter=self._deleter, flags=self.flags,
            dl_tensor=DLTensor(data=self.array.ctypes.data, device=DLDevice(1, 0), ndim=self.array.ndim,
                               dtype=DLDataType(2, 32, 1), shape=self._shape, strides=self._strides, byte_offset=0))
        self.capsule = _api.PyCapsule_New(ctypes.addressof(self.managed), VERSIONED_NAME, None)
        return self.capsule

    def _delete(self, managed):
        assert ctypes.addressof(managed.contents) == ctypes.addressof(self.managed)
        self.deleted += 1


@pytest.fixture(scope="module")
def mlp_fleet(models):
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="sequential", config=SLIM) as fleet:
        fleet.start().wait()
        yield fleet


@pytest.fixture
def x():
    return np.random.default_rng(5).uniform(-1, 1, (1, 64)).astype(np.float32)


def only(outputs):
    (value,) = outputs.values()
    return value


# --- consumer -----------------------------------------------------------------------------------
def test_a_versioned_capsule_is_read_marked_used_and_handed_back_after_the_run(mlp_fleet, x):
    expected = only(mlp_fleet.run("cpu", {"input": x}))
    producer = VersionedProducer(x)
    got = only(mlp_fleet.run("cpu", {"input": producer}))
    np.testing.assert_array_equal(got, expected)
    assert producer.calls == [{"stream": None, "max_version": (1, 0)}]  # host memory: no stream
    assert capsule_name(producer.capsule) == "used_dltensor_versioned"
    assert producer.deleted == 1


def test_a_read_only_dlpack_tensor_is_accepted(mlp_fleet, x):
    expected = only(mlp_fleet.run("cpu", {"input": x}))
    producer = VersionedProducer(x, flags=READ_ONLY)
    np.testing.assert_array_equal(only(mlp_fleet.run("cpu", {"input": producer})), expected)
    assert producer.deleted == 1


def test_a_dlpack_major_version_not_known_is_refused_and_handed_back(mlp_fleet, x):
    producer = VersionedProducer(x, major=2)
    with pytest.raises(ortfleet.Error, match=r"input 'input' is a DLPack 2\.x tensor"):
        mlp_fleet.run("cpu", {"input": producer})
    assert producer.deleted == 1


def test_a_producer_without_max_version_gets_the_legacy_call(mlp_fleet, x):
    class LegacyProducer:  # DLPack before 1.0: __dlpack__(stream=None) only, a "dltensor" capsule
        def __init__(self, array):
            self.array, self.calls, self.capsule = array, [], None

        def __dlpack__(self, stream=None):
            self.calls.append(stream)
            self.capsule = self.array.__dlpack__()
            return self.capsule

        def __dlpack_device__(self):
            return (1, 0)

    expected = only(mlp_fleet.run("cpu", {"input": x}))
    producer = LegacyProducer(x)
    np.testing.assert_array_equal(only(mlp_fleet.run("cpu", {"input": producer})), expected)
    assert producer.calls == [None]  # the first call, with max_version, failed on its signature
    assert capsule_name(producer.capsule) == "used_dltensor"


def test_what_is_not_a_dlpack_capsule_is_an_error_naming_the_input(mlp_fleet):
    class Liar:
        def __dlpack__(self, stream=None, max_version=None):
            return 42

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(ortfleet.Error, match=r"__dlpack__ of input 'input' returned 42"):
        mlp_fleet.run("cpu", {"input": Liar()})


def fake_library(monkeypatch, name, device_path):
    """A stand-in for torch or CuPy in sys.modules: its device context manager records which CUDA
    device is current."""
    state = {"current": 0, "entered": []}

    class device:  # torch.cuda.device(i) / cupy.cuda.Device(i)
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            self.previous, state["current"] = state["current"], self.index
            state["entered"].append(self.index)

        def __exit__(self, *exc):
            state["current"] = self.previous
            return False

    module = types.ModuleType(name)
    module.cuda = types.SimpleNamespace(**{device_path: device})
    monkeypatch.setitem(sys.modules, name, module)
    return state


@pytest.mark.parametrize("library,device_path", [("torch", "device"), ("cupy", "Device")])
def test_a_cuda_tensor_is_exported_with_its_device_current_on_the_legacy_stream(mlp_fleet, x, monkeypatch, library,
                                                                                device_path):
    state = fake_library(monkeypatch, library, device_path)

    class CudaTensor(VersionedProducer):  # says it lives on cuda:1; its capsule is host memory (no GPU here)
        def __dlpack__(self, **kwargs):
            if state["current"] != 1:  # what torch raises
                raise BufferError(f"Can't export tensors on a different CUDA device index. Expected: 1. "
                                  f"Current device: {state['current']}.")
            return super().__dlpack__(**kwargs)

    CudaTensor.__module__ = library + ".tensor"
    expected = only(mlp_fleet.run("cpu", {"input": x}))
    producer = CudaTensor(x, device=(2, 1))
    np.testing.assert_array_equal(only(mlp_fleet.run("cpu", {"input": producer})), expected)
    assert producer.calls == [{"stream": 1, "max_version": (1, 0)}]
    assert state["entered"] == [1] and state["current"] == 0  # device 1 current for the export only


def test_other_libraries_cuda_tensors_are_exported_as_they_are(mlp_fleet, x, monkeypatch):
    state = fake_library(monkeypatch, "torch", "device")
    producer = VersionedProducer(x, device=(2, 1))  # not torch's, not CuPy's: no device switch
    only(mlp_fleet.run("cpu", {"input": producer}))
    assert producer.calls == [{"stream": 1, "max_version": (1, 0)}]
    assert state["entered"] == []


# --- producer -----------------------------------------------------------------------------------
def read_tensor(tensor):
    n = int(np.prod([tensor.shape[i] for i in range(tensor.ndim)]))
    buffer = (ctypes.c_float * n).from_address(tensor.data + tensor.byte_offset)
    return np.frombuffer(buffer, dtype=np.float32, count=n).reshape([tensor.shape[i] for i in range(tensor.ndim)]).copy()


def test_device_tensor_gives_a_versioned_capsule_when_asked():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = _ortfleet._host_device_tensor(a)
    assert t.__dlpack_device__() == (1, 0)
    capsule = t.__dlpack__(stream=None, max_version=(1, 0))
    assert capsule_name(capsule) == "dltensor_versioned"
    managed = DLManagedTensorVersioned.from_address(_api.PyCapsule_GetPointer(capsule, VERSIONED_NAME))
    assert (managed.version.major, managed.version.minor) == (1, 0)
    assert managed.flags == 0  # writable
    dl = managed.dl_tensor
    assert (dl.device.device_type, dl.device.device_id) == (1, 0)
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (2, 32, 1)
    assert [dl.shape[i] for i in range(dl.ndim)] == [2, 3, 4]
    assert [dl.strides[i] for i in range(dl.ndim)] == [12, 4, 1]  # compact row-major, always given
    np.testing.assert_array_equal(read_tensor(dl), a)
    # What a consumer does: take it (rename the capsule), later hand it back.
    _api.PyCapsule_SetName(capsule, b"used_dltensor_versioned")
    managed.deleter(ctypes.pointer(managed))
    del capsule  # used: its destructor leaves the tensor alone
    unused = t.__dlpack__(max_version=(1, 3))  # any 1.x consumer reads 1.0
    assert capsule_name(unused) == "dltensor_versioned"
    del unused  # never taken: its destructor frees the tensor


def test_device_tensor_gives_a_legacy_capsule_to_older_consumers():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = _ortfleet._host_device_tensor(a)
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    capsule = t.__dlpack__(stream=None)
    managed = DLManagedTensor.from_address(_api.PyCapsule_GetPointer(capsule, b"dltensor"))
    np.testing.assert_array_equal(read_tensor(managed.dl_tensor), a)
    np.testing.assert_array_equal(np.from_dlpack(t), a)  # numpy as the consumer


def test_device_tensor_refuses_what_it_cannot_do():
    t = _ortfleet._host_device_tensor(np.zeros((2, 2), np.float32))
    with pytest.raises(BufferError, match="lives on cpu"):
        t.__dlpack__(dl_device=(2, 0))
    assert capsule_name(t.__dlpack__(dl_device=(1, 0))) == "dltensor"
    with pytest.raises(BufferError, match="does not copy"):
        t.__dlpack__(copy=True)
    with pytest.raises(TypeError, match="stream"):
        t.__dlpack__(stream="default")
    with pytest.raises(TypeError):
        t.__dlpack__(None)  # the array API's keywords only
