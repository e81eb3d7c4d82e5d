// The `ortfleet` Python module: ortfleet's Fleet and diagnostics for Python jobs (PyTorch and
// others). Every call that does C++ work releases the GIL, so other Python threads keep running
// while sessions start and inferences run.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <cctype>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "ortfleet/diagnostics/bench.hpp"
#include "ortfleet/diagnostics/doctor.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/fleet/worker_pool.hpp"
#include "ortfleet/diagnostics/profile.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/synth/synth.hpp"
#include "ortfleet/diagnostics/tune.hpp"

namespace py = pybind11;
using namespace ortfleet;

namespace {

// --- DLPack (the tensor exchange protocol of PyTorch, CuPy, JAX and NumPy), ABI as published -----
// dlpack.h of DLPack 1.x, and the Python side as the array API standard specifies __dlpack__.
constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLCUDA = 2;
constexpr int32_t kDLCUDAHost = 3;  // pinned host memory
/// The legacy default CUDA stream in __dlpack__(stream=...): the producer makes it wait for the
/// tensor's pending work.
constexpr int kLegacyDefaultStream = 1;
constexpr uint32_t kDLPackMajor = 1;  // the ABI of the structs below

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: compact row-major (allowed before DLPack 1.2)
  uint64_t byte_offset;
};
/// The legacy capsule's content ("dltensor").
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
/// DLPack 1.x ("dltensor_versioned").
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;  // bit 0: read only
  DLTensor dl_tensor;
};

constexpr const char* kCapsule = "dltensor";
constexpr const char* kUsedCapsule = "used_dltensor";
constexpr const char* kVersionedCapsule = "dltensor_versioned";
constexpr const char* kUsedVersionedCapsule = "used_dltensor_versioned";

ElementType dlpack_type(const DLDataType& t) {
  if (t.lanes != 1) throw Error("DLPack tensors with vector lanes are not supported");
  for (const auto& row : element_types()) {
    if (row.dlpack_code == t.code && row.size * 8 == t.bits) return row.type;
  }
  throw Error("unsupported DLPack element type (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits)");
}

DLDataType dlpack_dtype(ElementType type) {
  const auto* info = element_type_info(type);
  if (info == nullptr || info->dlpack_code < 0) throw Error("output type " + to_string(type) + " cannot be shared through DLPack");
  return {static_cast<uint8_t>(info->dlpack_code), static_cast<uint8_t>(info->size * 8), 1};
}

ElementType numpy_type(const py::dtype& d) {
  for (const auto& row : element_types()) {
    if (row.numpy_kind != 0 && row.numpy_kind == d.kind() && static_cast<py::ssize_t>(row.size) == d.itemsize()) return row.type;
  }
  throw Error("unsupported numpy dtype " + py::repr(d).cast<std::string>(), "Use float32, float16, float64, int64, int32, int8, uint8 or bool");
}

py::dtype numpy_dtype(ElementType t) {
  const auto* info = element_type_info(t);
  if (info == nullptr || info->numpy_kind == 0) throw Error("output type " + to_string(t) + " has no numpy equivalent");
  return py::dtype(info->name);
}

/// A DLPack tensor taken over from its producer's capsule (legacy or versioned): read in place
/// during the run, handed back to the producer (its deleter called) when this is destroyed.
class TakenDlpack {
 public:
  /// Takes the tensor out of `capsule` and marks the capsule used, as the protocol asks, so that
  /// the capsule's own destructor leaves the tensor to us.
  TakenDlpack(py::handle capsule, const std::string& input) {
    PyObject* c = capsule.ptr();
    if (PyCapsule_IsValid(c, kVersionedCapsule)) {
      versioned_ = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kVersionedCapsule));
      PyCapsule_SetName(c, kUsedVersionedCapsule);
    } else if (PyCapsule_IsValid(c, kCapsule)) {
      legacy_ = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kCapsule));
      PyCapsule_SetName(c, kUsedCapsule);
    } else {
      throw Error("the __dlpack__ of input '" + input + "' returned " + py::repr(capsule).cast<std::string>() +
                      ", not an unused DLPack capsule",
                  "Give a numpy array or a tensor of torch, CuPy or JAX");
    }
  }
  ~TakenDlpack() {
    if (versioned_ != nullptr && versioned_->deleter != nullptr) versioned_->deleter(versioned_);
    if (legacy_ != nullptr && legacy_->deleter != nullptr) legacy_->deleter(legacy_);
  }
  TakenDlpack(const TakenDlpack&) = delete;
  TakenDlpack& operator=(const TakenDlpack&) = delete;

  /// DLPack's rule: a different major version has another layout past the version field; only
  /// the deleter (kept where it was) may be used.
  bool layout_known() const { return versioned_ == nullptr || versioned_->version.major == kDLPackMajor; }
  uint32_t major_version() const { return versioned_ != nullptr ? versioned_->version.major : 0; }
  const DLTensor& tensor() const { return versioned_ != nullptr ? versioned_->dl_tensor : legacy_->dl_tensor; }

 private:
  DLManagedTensor* legacy_ = nullptr;
  DLManagedTensorVersioned* versioned_ = nullptr;
};

/// Inputs for one run, and the Python objects and DLPack tensors that keep their memory alive.
struct PreparedInputs {
  std::vector<Tensor> tensors;
  std::vector<py::object> keep_alive;
  std::vector<std::unique_ptr<TakenDlpack>> taken;  // handed back to their producers after the run
};

/// The context manager that makes CUDA device `ordinal` current for the library that made `value`,
/// or None. torch and CuPy export a CUDA tensor only with its device current (torch raises
/// "BufferError: Can't export tensors on a different CUDA device index" otherwise), and a job that
/// feeds every GPU from one thread has device 0 current. Imported only when the tensor is theirs.
py::object producer_device_scope(py::handle value, int ordinal) {
  for (const py::handle cls : py::type::of(value).attr("__mro__")) {
    const py::object module = py::getattr(cls, "__module__", py::none());
    if (!py::isinstance<py::str>(module)) continue;
    const std::string root = module.cast<std::string>().substr(0, module.cast<std::string>().find('.'));
    if (root == "torch") return py::module_::import("torch").attr("cuda").attr("device")(ordinal);
    if (root == "cupy") return py::module_::import("cupy").attr("cuda").attr("Device")(ordinal);
  }
  return py::none();
}

/// value.__dlpack__ as a DLPack consumer calls it: a DLPack 1.x capsule asked for first (a legacy
/// one from producers that do not take max_version), CUDA tensors exported with their device
/// current and on the legacy default stream. That stream only orders the producer's pending work;
/// the session synchronises the device before ONNX Runtime reads the input.
py::object export_dlpack(py::handle value) {
  int32_t device_type = kDLCPU;
  int32_t device_id = 0;
  if (py::hasattr(value, "__dlpack_device__")) {
    const py::tuple device = value.attr("__dlpack_device__")();
    device_type = device[0].cast<int32_t>();
    device_id = device[1].cast<int32_t>();
  }
  const bool on_cuda = device_type == kDLCUDA;
  const py::object stream = on_cuda ? py::object(py::int_(kLegacyDefaultStream)) : py::object(py::none());
  const auto call = [&]() -> py::object {
    try {
      return value.attr("__dlpack__")(py::arg("stream") = stream, py::arg("max_version") = py::make_tuple(kDLPackMajor, 0));
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_TypeError)) throw;  // a TypeError: a producer from before DLPack 1.0
    }
    return value.attr("__dlpack__")(py::arg("stream") = stream);
  };
  const py::object scope = on_cuda ? producer_device_scope(value, device_id) : py::object(py::none());
  if (scope.is_none()) return call();
  scope.attr("__enter__")();
  py::object capsule;
  try {
    capsule = call();
  } catch (...) {
    scope.attr("__exit__")(py::none(), py::none(), py::none());
    throw;
  }
  scope.attr("__exit__")(py::none(), py::none(), py::none());
  return capsule;
}

/// A DLPack tensor (torch, CuPy, JAX), read in place wherever it lives (host or GPU).
Tensor consume_dlpack(PreparedInputs& out, const std::string& name, py::handle value) {
  const py::object capsule = export_dlpack(value);
  const TakenDlpack& taken = *out.taken.emplace_back(std::make_unique<TakenDlpack>(capsule, name));
  if (!taken.layout_known()) {
    throw Error("input '" + name + "' is a DLPack " + std::to_string(taken.major_version()) + ".x tensor, and ortfleet reads DLPack 1.x",
                "Update ortfleet, or give a numpy array");
  }
  // A read-only tensor (flags bit 0) is fine: sessions only read their inputs.
  const DLTensor& t = taken.tensor();
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  if (t.strides != nullptr) {  // must be C-contiguous
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (shape[static_cast<size_t>(i)] != 1 && t.strides[i] != expected) {
        throw Error("input '" + name + "' is not contiguous", "Call .contiguous() on it first");
      }
      expected *= shape[static_cast<size_t>(i)];
    }
  }
  Device device = Device::cpu();
  if (t.device.device_type == kDLCUDA) device = Device::cuda(t.device.device_id);
  else if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    throw Error("input '" + name + "' lives on a DLPack device of type " + std::to_string(t.device.device_type),
                "Give host or CUDA tensors");
  }
  out.keep_alive.push_back(py::reinterpret_borrow<py::object>(value));
  return Tensor::borrow(name, dlpack_type(t.dtype), shape, static_cast<char*>(t.data) + t.byte_offset, device);
}

/// A numpy array, C-contiguous (no copy when already so); anything else (lists, scalars) becomes an
/// array of the type the model declares for this input.
Tensor numpy_input(PreparedInputs& out, const std::string& name, py::handle value, const std::vector<TensorSpec>& specs) {
  py::object source = py::reinterpret_borrow<py::object>(value);
  if (!py::isinstance<py::array>(value)) {
    for (const auto& s : specs) {
      if (s.name == name && element_size(s.type) > 0) {
        source = py::module_::import("numpy").attr("asarray")(value, numpy_dtype(s.type));
      }
    }
  }
  auto array = py::array::ensure(source, py::array::c_style);
  if (!array) throw Error("input '" + name + "' is neither an array nor a DLPack tensor");
  std::vector<int64_t> shape(array.shape(), array.shape() + array.ndim());
  out.keep_alive.push_back(array);
  // Read-only arrays are welcome: sessions only read their inputs, so the const_cast for the
  // borrowed Tensor (which takes void*) writes nothing.
  return Tensor::borrow(name, numpy_type(array.dtype()), shape, const_cast<void*>(array.data()));
}

void add_input(PreparedInputs& out, const std::string& name, py::handle value, const std::vector<TensorSpec>& specs) {
  if (value.is_none()) throw Error("input '" + name + "' is None: give a numpy array or a DLPack tensor");
  const bool dlpack = !py::isinstance<py::array>(value) && py::hasattr(value, "__dlpack__");
  out.tensors.push_back(dlpack ? consume_dlpack(out, name, value) : numpy_input(out, name, value, specs));
}

/// A tensor that stays where it is: on the GPU, handed to torch.from_dlpack / cupy.from_dlpack.
class DeviceTensor {
 public:
  explicit DeviceTensor(Tensor t) : tensor_(std::move(t)) {}
  DLDevice device() const { return {tensor_.on_gpu() ? kDLCUDA : kDLCPU, tensor_.on_gpu() ? tensor_.device.index : 0}; }
  py::tuple dlpack_device() const { return py::make_tuple(device().device_type, device().device_id); }

  /// __dlpack__ as the array API standard specifies it. `stream` is the consumer's: the outputs are
  /// complete when a run returns (the session synchronises them), so any stream may read them
  /// at once and there is nothing to order.
  py::capsule dlpack(const py::object& stream, const py::object& max_version, const py::object& dl_device,
                     const py::object& copy) const {
    if (!stream.is_none() && !py::isinstance<py::int_>(stream)) throw py::type_error("stream must be an int or None");
    if (!dl_device.is_none() && !py::tuple(dl_device).equal(dlpack_device())) {
      throw py::buffer_error("this tensor lives on " + tensor_.device.to_string() + ", and ortfleet does not copy it elsewhere");
    }
    if (!copy.is_none() && py::bool_(copy)) {
      throw py::buffer_error("ortfleet does not copy its outputs: call from_dlpack without copy=True, then copy the result");
    }
    const bool versioned = !max_version.is_none() && py::tuple(max_version)[0].cast<int64_t>() >= kDLPackMajor;
    return versioned ? export_capsule<DLManagedTensorVersioned>(kVersionedCapsule) : export_capsule<DLManagedTensor>(kCapsule);
  }
  const Tensor& tensor() const { return tensor_; }

 private:
  /// A capsule named `name` holding a Managed (DLManagedTensor or DLManagedTensorVersioned) that
  /// keeps the output alive until its consumer calls the deleter.
  template <typename Managed>
  py::capsule export_capsule(const char* name) const {
    struct Holder {
      Managed managed{};
      Tensor tensor;
      std::vector<int64_t> shape;
      std::vector<int64_t> strides;
    };
    auto holder = std::make_unique<Holder>();
    holder->tensor = tensor_;
    holder->shape = tensor_.shape;
    // Strides always given (compact, row-major): DLPack 1.2 no longer lets consumers assume them.
    holder->strides.assign(holder->shape.size(), 1);
    for (size_t i = holder->shape.size(); i-- > 1;) holder->strides[i - 1] = holder->strides[i] * holder->shape[i];
    DLTensor& t = holder->managed.dl_tensor;
    t.data = holder->tensor.data;
    t.device = device();
    t.ndim = static_cast<int32_t>(holder->shape.size());
    t.dtype = dlpack_dtype(tensor_.type);
    t.shape = holder->shape.data();
    t.strides = holder->strides.data();
    t.byte_offset = 0;
    if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
      holder->managed.version = {kDLPackMajor, 0};
      holder->managed.flags = 0;  // writable: the output is the consumer's to use
    }
    holder->managed.manager_ctx = holder.get();
    holder->managed.deleter = [](Managed* m) { delete static_cast<Holder*>(m->manager_ctx); };
    py::capsule capsule(&holder->managed, name, [](PyObject* c) {
      // A consumer renames the capsule ("used_...") and calls the deleter itself; if none took
      // the tensor, it is freed here.
      const char* unused = std::is_same_v<Managed, DLManagedTensorVersioned> ? kVersionedCapsule : kCapsule;
      if (PyCapsule_IsValid(c, unused)) {
        auto* m = static_cast<Managed*>(PyCapsule_GetPointer(c, unused));
        if (m != nullptr && m->deleter != nullptr) m->deleter(m);
      }
    });
    static_cast<void>(holder.release());  // owned by the capsule now, then by its consumer
    return capsule;
  }

  Tensor tensor_;
};

py::object to_python(const Tensor& t) {
  if (t.on_gpu()) return py::cast(DeviceTensor(t));
  // Zero copy: the array views the output's memory and keeps its owner alive.
  auto* owner = new std::shared_ptr<void>(t.owner);
  py::capsule base(owner, [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); });
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  return py::array(numpy_dtype(t.type), shape, t.data, base);
}

Device to_device(const py::handle& h) {
  if (py::isinstance<py::int_>(h)) {
    const int i = h.cast<int>();
    if (i < 0) throw Error("device numbers are GPU ordinals from 0", "Use 0, 1, ... or \"cpu\"");
    return Device::cuda(i);
  }
  if (py::isinstance<py::str>(h)) {
    // "1" is GPU 1; anything else is parsed as written, so that errors quote what the user gave.
    const std::string s = h.cast<std::string>();
    const bool ordinal = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    return Device::parse(ordinal ? "cuda:" + s : s);
  }
  throw Error("a device is a GPU ordinal (0), \"cuda:1\" or \"cpu\"");
}

std::vector<Device> to_devices(const py::object& devices) {
  if (devices.is_none()) return parse_devices("all", gpu_count());
  if (py::isinstance<py::str>(devices)) return parse_devices(devices.cast<std::string>(), gpu_count());
  std::vector<Device> out;
  for (const auto& d : devices) out.push_back(to_device(d));
  const int gpus = gpu_count();
  for (const auto& d : out) {
    if (d.is_gpu() && d.index >= gpus) parse_devices(std::to_string(d.index), gpus);  // the error naming the GPUs there are
  }
  return out;
}

RunConfig to_config(const py::object& config) {
  if (config.is_none()) return {};
  if (py::isinstance<py::str>(config)) return RunConfig::load(config.cast<std::string>());
  if (py::isinstance<py::dict>(config)) {
    py::dict d = py::reinterpret_borrow<py::dict>(config);
    if (!d.contains("ortfleet_config")) d["ortfleet_config"] = 1;
    return RunConfig::from_json(py::module_::import("json").attr("dumps")(d).cast<std::string>(), "the config dict");
  }
  throw Error("config is a path to a config file, a dict, or None");
}

/// `h` as a whole number: Python ints and numpy's integers, not bools, floats or strings.
std::optional<int64_t> whole_number(py::handle h) {
  if (py::isinstance<py::bool_>(h) || !PyIndex_Check(h.ptr())) return std::nullopt;
  const auto index = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) return std::nullopt;
  return value;
}

/// One dim of a shape given as a dict: a positive whole number.
int64_t shape_dim(py::handle dim, const std::string& input) {
  const auto value = whole_number(dim);
  if (!value || *value <= 0) {
    throw Error("shapes: the dims of input '" + input + "' must be positive whole numbers, not " + py::repr(dim).cast<std::string>(),
                "Write {\"" + input + "\": (8, 3, 224, 224)}");
  }
  return *value;
}

/// shapes= of Fleet: a list of "input=8x3x224x224" / "a=1x128,b=1x128" strings or
/// {"input": (8, 3, 224, 224)} dicts (one of them alone is taken as a list of one).
std::vector<InputShapes> to_shape_list(const py::object& shapes) {
  const auto add = [](std::vector<InputShapes>& out, py::handle item) {
    if (py::isinstance<py::str>(item)) {
      const auto parsed = parse_shape_list(item.cast<std::string>());
      out.insert(out.end(), parsed.begin(), parsed.end());
    } else if (py::isinstance<py::dict>(item)) {
      InputShapes signature;
      for (const auto& [name, dims] : py::reinterpret_borrow<py::dict>(item)) {
        if (!py::isinstance<py::str>(name)) throw Error("shapes: input names are strings, not " + py::repr(name).cast<std::string>());
        const std::string input = name.cast<std::string>();
        if (!py::isinstance<py::sequence>(dims) || py::isinstance<py::str>(dims)) {
          throw Error("shapes: input '" + input + "' needs a tuple of dims, not " + py::repr(dims).cast<std::string>(),
                      "Write {\"" + input + "\": (8, 3, 224, 224)}");
        }
        auto& out_dims = signature[input];
        for (const auto dim : py::reinterpret_borrow<py::sequence>(dims)) out_dims.push_back(shape_dim(dim, input));
      }
      if (signature.empty()) throw Error("shapes: an empty dict declares no shape");
      out.push_back(std::move(signature));
    } else {
      throw Error("shapes: " + py::repr(item).cast<std::string>() + " is neither a string nor a dict",
                  "Give shapes=[\"input=8x3x224x224\"] or shapes=[{\"input\": (8, 3, 224, 224)}]");
    }
  };
  std::vector<InputShapes> out;
  if (py::isinstance<py::str>(shapes) || py::isinstance<py::dict>(shapes)) {
    add(out, shapes);
  } else if (py::isinstance<py::sequence>(shapes)) {
    for (const auto item : py::reinterpret_borrow<py::sequence>(shapes)) add(out, item);
  } else {
    throw Error("shapes is a list of strings (\"input=8x3x224x224\") or dicts ({\"input\": (8, 3, 224, 224)})");
  }
  return out;
}

/// batches= of Fleet: a list of positive batch sizes, or "1,2,4,8".
std::vector<int64_t> to_batch_list(const py::object& batches) {
  if (py::isinstance<py::str>(batches)) return parse_batch_list(batches.cast<std::string>());
  if (!py::isinstance<py::sequence>(batches)) throw Error("batches is a list of batch sizes, such as [1, 2, 4, 8]");
  std::vector<int64_t> out;
  for (const auto b : py::reinterpret_borrow<py::sequence>(batches)) {
    const auto size = whole_number(b);
    if (!size || *size <= 0) {
      throw Error("batches: batch sizes are positive whole numbers, not " + py::repr(b).cast<std::string>(), "Give batches=[1, 2, 4, 8]");
    }
    out.push_back(*size);
  }
  return out;
}

/// A file of warm-up inputs that lives as long as the fleet using it: the user's path, or the arrays
/// of a dict saved with numpy.savez into a private temporary file, removed with the fleet.
class WarmupInputsFile {
 public:
  WarmupInputsFile() = default;
  WarmupInputsFile(const WarmupInputsFile&) = delete;
  WarmupInputsFile& operator=(const WarmupInputsFile&) = delete;
  ~WarmupInputsFile() {
    if (!temporary_.empty()) std::remove(temporary_.c_str());
  }
  /// Sets `o` from the keywords: warmup_inputs (a path, or a dict of name -> array) and input_ranges
  /// (a dict of name -> value, or (lo, hi)).
  void apply(WarmupOptions& o, const py::object& inputs, const py::object& ranges) {
    if (py::isinstance<py::str>(inputs) || py::hasattr(inputs, "__fspath__")) {
      o.inputs_file = py::module_::import("os").attr("path").attr("abspath")(inputs).cast<std::string>();
    } else if (py::isinstance<py::dict>(inputs)) {
      auto tempfile = py::module_::import("tempfile");
      py::tuple made = tempfile.attr("mkstemp")(py::arg("suffix") = ".npz", py::arg("prefix") = "ortfleet-warmup-");
      py::module_::import("os").attr("close")(made[0]);
      temporary_ = made[1].cast<std::string>();
      py::dict arrays;
      auto numpy = py::module_::import("numpy");
      for (const auto& [name, value] : py::reinterpret_borrow<py::dict>(inputs)) {
        arrays[name] = numpy.attr("asarray")(value, py::arg("order") = "C");  // (ascontiguousarray makes a scalar 1-d)
      }
      numpy.attr("savez")(temporary_, **arrays);
      o.inputs_file = temporary_;
    } else if (!inputs.is_none()) {
      throw Error("warmup_inputs is a path of a .npz/.npy file or a dict of input name -> array, not " + py::repr(inputs).cast<std::string>());
    }
    if (ranges.is_none()) return;
    if (!py::isinstance<py::dict>(ranges)) throw Error("input_ranges is a dict of input name -> value or (lo, hi), e.g. {'sr': 16000}");
    for (const auto& [name, value] : py::reinterpret_borrow<py::dict>(ranges)) {
      const std::string input = py::str(name);
      const std::string text = py::isinstance<py::sequence>(value) && py::len(value) == 2
                                   ? py::str(value.cast<py::sequence>()[0]).cast<std::string>() + ":" + py::str(value.cast<py::sequence>()[1]).cast<std::string>()
                                   : py::str(value).cast<std::string>();
      o.input_ranges[input] = parse_input_range(input + "=" + text).second;
    }
  }

 private:
  std::string temporary_;
};

/// The shape keywords of Fleet, over what the config says (each one given replaces the config's).
/// Fleet(buckets=...): {"x.2": [480, 640, 960], "x.3": "320:960:128"} or ["x.2=480,640,960", ...].
std::vector<DimBuckets> to_buckets(const py::object& value) {
  std::vector<DimBuckets> out;
  if (py::isinstance<py::dict>(value)) {
    for (const auto& [key, sizes] : value.cast<py::dict>()) {
      std::string text = py::str(key).cast<std::string>() + "=";
      if (py::isinstance<py::str>(sizes)) {
        text += sizes.cast<std::string>();
      } else if (!py::isinstance<py::iterable>(sizes)) {
        const auto n = whole_number(sizes);
        if (!n) throw Error("buckets for " + py::str(key).cast<std::string>() + " must be whole numbers, not " + py::repr(sizes).cast<std::string>());
        text += std::to_string(*n);
      } else {
        std::string list;
        for (const auto& size : sizes.cast<py::iterable>()) {
          const auto n = whole_number(size);
          if (!n) throw Error("buckets for " + py::str(key).cast<std::string>() + " must be whole numbers, not " + py::repr(size).cast<std::string>());
          if (!list.empty()) list.push_back(',');
          list.append(std::to_string(*n));
        }
        text += list;
      }
      out.push_back(parse_buckets(text));
    }
    return out;
  }
  if (py::isinstance<py::str>(value)) return {parse_buckets(value.cast<std::string>())};
  for (const auto& item : value.cast<py::iterable>()) out.push_back(parse_buckets(py::str(item).cast<std::string>()));
  return out;
}

void apply_shape_keywords(ShapeOptions& o, const py::object& shapes, const py::object& batches, const py::object& max_sessions,
                          const py::object& pad_batch, const py::object& buckets, const py::object& pad_values,
                          const py::object& shape_policy) {
  if (!buckets.is_none()) o.buckets = to_buckets(buckets);
  if (!pad_values.is_none()) {
    if (!py::isinstance<py::dict>(pad_values)) throw Error("pad_values must be a dict of input name -> number, not " + py::repr(pad_values).cast<std::string>());
    for (const auto& [name, v] : pad_values.cast<py::dict>()) {
      if (!py::isinstance<py::int_>(v) && !py::isinstance<py::float_>(v)) {
        throw Error("pad value of '" + py::str(name).cast<std::string>() + "' must be a number, not " + py::repr(v).cast<std::string>());
      }
      o.pad_values[py::str(name).cast<std::string>()] = v.cast<double>();
    }
  }
  if (!shape_policy.is_none()) o.policy = parse_shape_policy(py::str(shape_policy).cast<std::string>());
  if (!shapes.is_none()) o.declared = to_shape_list(shapes);
  if (!batches.is_none()) o.batches = to_batch_list(batches);
  if (!max_sessions.is_none()) {
    const auto count = whole_number(max_sessions);
    if (!count || *count < 1 || *count > kMaxShapeSessions) {
      throw Error("max_shape_sessions must be a whole number of sessions from 1 to " + std::to_string(kMaxShapeSessions) + ", not " +
                      py::repr(max_sessions).cast<std::string>(),
                  "1 serves every shape from one session, as ONNX Runtime alone does");
    }
    o.max_sessions = static_cast<int>(*count);
  }
  if (!pad_batch.is_none()) {
    if (!py::isinstance<py::bool_>(pad_batch)) throw Error("pad_batch must be True or False, not " + py::repr(pad_batch).cast<std::string>());
    o.pad_batch = pad_batch.cast<bool>();
  }
  o.validate();
}

py::object parse_json(const std::string& text) { return py::module_::import("json").attr("loads")(text); }


/// A warm worker pool (ortfleet.Pool): shared with the fleets started on it.
class PyPool {
 public:
  PyPool(const py::object& devices, const std::string& ort_library, bool narrow_workers, size_t max_resident_sessions,
         double start_timeout, bool prime_libraries, bool isolate_new_models) {
    PoolOptions o;
    o.prime_libraries = prime_libraries;
    o.isolate_new_models = isolate_new_models;
    o.devices = to_devices(devices);
    o.ort_library = ort_library;
    o.narrow_workers = narrow_workers;
    o.max_resident_sessions = max_resident_sessions;
    o.start_timeout_s = start_timeout;
    py::gil_scoped_release release;
    pool_ = std::make_shared<WorkerPool>(o);
  }
  bool wait(const std::optional<double>& timeout) {
    py::gil_scoped_release release;
    return timeout ? pool().wait(*timeout) : pool().wait();
  }
  py::object status() {
    std::string text;
    {
      py::gil_scoped_release release;
      text = pool().status_json();
    }
    return parse_json(text);
  }
  size_t evict() {
    py::gil_scoped_release release;
    return pool().evict();
  }
  py::list devices() {
    py::list out;
    for (const auto& d : pool().devices()) out.append(d.to_string());
    return out;
  }
  void close() {
    py::gil_scoped_release release;
    pool_.reset();  // the workers stop once no fleet uses them either
  }
  const std::shared_ptr<WorkerPool>& shared() const {
    if (!pool_) throw Error("this pool was closed", "Make a new ortfleet.Pool");
    return pool_;
  }

 private:
  WorkerPool& pool() { return *shared(); }
  std::shared_ptr<WorkerPool> pool_;
};

/// The pool ortfleet.prewarm() started: later fleets whose devices it has start on it.
std::shared_ptr<PyPool>& prewarmed_pool() {
  static std::shared_ptr<PyPool> pool;
  return pool;
}

/// Where a fleet starts: pool=None uses the prewarmed pool when it has every device and the strategy
/// is the fleet's; a Pool, or a socket path (str) of `ortfleet serve`; False never uses a pool.
void choose_pool(FleetOptions& o, const py::object& pool) {
  if (pool.is_none()) {
    const auto& prewarmed = prewarmed_pool();
    if (!prewarmed || (o.strategy != Strategy::automatic && o.strategy != Strategy::fleet)) return;
    const auto& have = prewarmed->shared()->devices();
    const auto& want = o.devices.empty() ? have : o.devices;
    if (std::all_of(want.begin(), want.end(), [&](const Device& d) { return std::find(have.begin(), have.end(), d) != have.end(); })) {
      o.pool = prewarmed->shared();
      if (o.devices.empty()) o.devices = have;
    }
    return;
  }
  if (py::isinstance<py::bool_>(pool)) {
    if (pool.cast<bool>()) throw Error("pool=True is not a pool", "Pass an ortfleet.Pool, a pool socket path, None or False");
    return;
  }
  if (py::isinstance<py::str>(pool)) {
    o.pool_socket = pool.cast<std::string>();
    return;
  }
  o.pool = pool.cast<PyPool&>().shared();
}

py::list specs_list(const std::vector<TensorSpec>& specs) {
  py::list out;
  for (const auto& s : specs) {
    py::dict d;
    d["name"] = s.name;
    d["type"] = to_string(s.type);
    d["shape"] = s.shape;
    out.append(d);
  }
  return out;
}

py::dict outputs_dict(const std::vector<Tensor>& outputs) {
  py::dict result;
  for (const auto& t : outputs) result[py::str(t.name)] = to_python(t);
  return result;
}

/// Fleet.run_async's answer, shaped like concurrent.futures.Future: result(timeout), done(). Holds
/// the inputs' Python objects until the run has read them.
class PyRunFuture {
 public:
  PyRunFuture(std::future<std::vector<Tensor>> future, PreparedInputs inputs)
      : inputs_(std::move(inputs)), future_(future.share()) {}

  bool done() const { return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
  py::dict result(const std::optional<double>& timeout) {
    bool ready = true;
    std::vector<Tensor> outputs;
    {
      py::gil_scoped_release release;
      if (timeout) ready = future_.wait_for(std::chrono::duration<double>(*timeout)) == std::future_status::ready;
      if (ready) outputs = future_.get();  // throws the run's error
    }
    if (!ready) {
      PyErr_SetString(PyExc_TimeoutError, "the run did not finish within the timeout");
      throw py::error_already_set();
    }
    return outputs_dict(outputs);
  }

 private:
  PreparedInputs inputs_;  // destroyed after future_, which waits for a run on a thread of this process
  std::shared_future<std::vector<Tensor>> future_;
};

class PyFleet {
 public:
  PyFleet(const std::string& model, const py::object& devices, const std::string& strategy, const py::object& config,
          int warmup, const std::string& ort_library, const std::string& profile_dir, const py::object& shapes,
          const py::object& batches, const py::object& max_shape_sessions, const py::object& pad_batch, double start_timeout,
          double run_timeout, const py::object& pool, const py::object& warmup_inputs, const py::object& input_ranges,
          const py::object& buckets, const py::object& pad_values, const py::object& shape_policy) {
    FleetOptions o;
    o.start_timeout_s = start_timeout;
    o.run_timeout_s = run_timeout;
    o.devices = to_devices(devices);
    o.strategy = parse_strategy(strategy);
    o.config = to_config(config);
    apply_shape_keywords(o.config.shapes, shapes, batches, max_shape_sessions, pad_batch, buckets, pad_values, shape_policy);
    warmup_file_.apply(o.config.warmup, warmup_inputs, input_ranges);
    o.warmup_runs = warmup;
    o.ort_library = ort_library;
    o.profile_dir = profile_dir;
    choose_pool(o, pool);
    py::gil_scoped_release release;
    fleet_ = std::make_unique<Fleet>(model, o);
  }

  PyFleet& start() {
    {
      py::gil_scoped_release release;
      fleet().start();
    }
    return *this;
  }
  bool wait(const std::optional<double>& timeout) {
    py::gil_scoped_release release;
    return timeout ? fleet().wait(*timeout) : fleet().wait();
  }
  bool ready(const py::object& device) { return fleet().ready(to_device(device)); }
  py::list status() {
    py::list out;
    for (const auto& s : fleet().status()) out.append(parse_json(s.to_json()));  // as `ortfleet start --json` prints it
    return out;
  }
  py::dict run(const py::object& device, const py::dict& inputs, bool outputs_on_device) {
    const Device d = to_device(device);
    PreparedInputs prepared = prepare(inputs);
    std::vector<Tensor> outputs;
    {
      py::gil_scoped_release release;
      outputs = fleet().run(d, prepared.tensors, outputs_on_device);
    }
    return outputs_dict(outputs);
  }
  std::unique_ptr<PyRunFuture> run_async(const py::object& device, const py::dict& inputs, bool outputs_on_device) {
    const Device d = to_device(device);
    PreparedInputs prepared = prepare(inputs);
    std::future<std::vector<Tensor>> future;
    {
      py::gil_scoped_release release;
      future = fleet().run_async(d, prepared.tensors, outputs_on_device);
    }
    return std::make_unique<PyRunFuture>(std::move(future), std::move(prepared));
  }
  py::list devices() {
    py::list out;
    for (const auto& d : fleet().devices()) out.append(d.to_string());
    return out;
  }
  std::string strategy() { return to_string(fleet().strategy()); }
  py::list inputs() {
    const auto specs = fleet().inputs();
    return specs_list(specs);
  }
  py::list outputs() {
    const auto specs = fleet().outputs();
    return specs_list(specs);
  }
  py::dict transfer_counters() {
    const TransferCounters c = fleet().transfer_counters();
    py::dict out;
    out["inputs_host_bytes"] = c.inputs_host_bytes;
    out["inputs_ipc_bytes"] = c.inputs_ipc_bytes;
    out["inputs_staged_bytes"] = c.inputs_staged_bytes;
    out["outputs_host_bytes"] = c.outputs_host_bytes;
    out["outputs_ipc_bytes"] = c.outputs_ipc_bytes;
    out["outputs_staged_bytes"] = c.outputs_staged_bytes;
    out["ipc_opens"] = c.ipc_opens;
    return out;
  }
  py::object timeline() { return parse_json(fleet().timeline().to_json()); }
  std::string trace() { return fleet().timeline().to_chrome_trace(); }
  void shutdown() {
    if (!fleet_) return;
    py::gil_scoped_release release;
    fleet_->shutdown();
  }

 private:
  Fleet& fleet() {
    if (!fleet_) throw Error("this fleet was closed");
    return *fleet_;
  }
  PreparedInputs prepare(const py::dict& inputs) {
    PreparedInputs prepared;
    const auto specs = fleet().inputs();
    for (const auto& [name, value] : inputs) add_input(prepared, py::str(name), value, specs);
    return prepared;
  }
  WarmupInputsFile warmup_file_;  // outlives fleet_, whose workers may read it
  std::unique_ptr<Fleet> fleet_;
};

}  // namespace

PYBIND11_MODULE(_ortfleet, m) {
  m.doc() = "ortfleet: ONNX Runtime sessions started fast on every GPU, and why start-up is slow";
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      error(e.what());
    }
  });

  py::class_<DeviceTensor>(m, "DeviceTensor", "An output left on its GPU; pass it to torch.from_dlpack or cupy.from_dlpack")
      .def("__dlpack__", &DeviceTensor::dlpack, py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
           py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
           "A DLPack capsule over the output, in place (DLPack 1.x when max_version asks for it)")
      .def("__dlpack_device__", &DeviceTensor::dlpack_device)
      .def_property_readonly("shape", [](const DeviceTensor& t) { return t.tensor().shape; })
      .def_property_readonly("dtype", [](const DeviceTensor& t) { return to_string(t.tensor().type); });

  py::class_<PyRunFuture>(m, "RunFuture", "A run in flight (Fleet.run_async), like concurrent.futures.Future")
      .def("done", &PyRunFuture::done, "True once the run has finished (or failed)")
      .def("result", &PyRunFuture::result, py::arg("timeout") = py::none(),
           "The outputs, waiting at most `timeout` seconds (TimeoutError then); raises the run's error");

  py::class_<PyFleet>(m, "Fleet", "One ready ONNX Runtime session per device")
      .def(py::init<const std::string&, const py::object&, const std::string&, const py::object&, int, const std::string&,
                    const std::string&, const py::object&, const py::object&, const py::object&, const py::object&, double,
                    double, const py::object&, const py::object&, const py::object&, const py::object&, const py::object&,
                    const py::object&>(),
           py::arg("model"), py::arg("devices") = py::none(), py::kw_only(), py::arg("strategy") = "auto", py::arg("config") = py::none(),
           py::arg("warmup") = 1, py::arg("ort_library") = "", py::arg("profile_dir") = "", py::arg("shapes") = py::none(),
           py::arg("batches") = py::none(), py::arg("max_shape_sessions") = py::none(), py::arg("pad_batch") = py::none(),
           py::arg("start_timeout") = FleetOptions{}.start_timeout_s, py::arg("run_timeout") = FleetOptions{}.run_timeout_s,
           py::arg("pool") = py::none(), py::arg("warmup_inputs") = py::none(), py::arg("input_ranges") = py::none(),
           py::arg("buckets") = py::none(), py::arg("pad_values") = py::none(), py::arg("shape_policy") = py::none(),
           "warmup_inputs: real inputs for warm-up (and for checking the model cache's entry), a dict of input name -> "
           "numpy array or the path of a .npz/.npy file; input_ranges: values of generated ones, a dict of input name -> "
           "value or (lo, hi), e.g. {'sr': 16000}. "
           "pool: an ortfleet.Pool, or the socket path of an `ortfleet serve` daemon, to start on warm workers (None: the "
           "pool ortfleet.prewarm() started, when it has every device; False: no pool). "
           "shapes, batches, max_shape_sessions and pad_batch set the config's \"shapes\" section: one ONNX Runtime session "
           "per input shape, declared shapes made and warmed at start-up. buckets: dims padded up to a few sizes, outputs "
           "cropped back, {'x.2': [480, 640, 960], 'x.3': '320:960:128'}; pad_values: {'input_ids': 0}; shape_policy: "
           "'measured' (default), 'per-shape' or 'shared', what serves a shape nothing was declared for. start_timeout (seconds, default two hours): a "
           "device's worker that is not ready by then is killed and the device fails; run_timeout (default ten minutes): "
           "the same for one run")
      .def("start", &PyFleet::start, "Begin starting every device; returns at once (the GIL is released)",
           py::return_value_policy::reference_internal)
      .def("wait", &PyFleet::wait, py::arg("timeout") = py::none(),
           "Block until every device is ready or failed, or `timeout` seconds; True when all are ready, False when "
           "one failed or is still starting at the timeout")
      .def("ready", &PyFleet::ready, py::arg("device"))
      .def("status", &PyFleet::status)
      .def("run", &PyFleet::run, py::arg("device"), py::arg("inputs"), py::arg("outputs_on_device") = false,
           "Run one inference: inputs maps names to numpy arrays or DLPack tensors (torch, CuPy)")
      .def("run_async", &PyFleet::run_async, py::arg("device"), py::arg("inputs"), py::arg("outputs_on_device") = false,
           "Submit one inference and return at once: a future whose result(timeout=None) gives the outputs of run(). "
           "Several runs may be in flight per device, so one thread can keep every device busy")
      .def_property_readonly("devices", &PyFleet::devices)
      .def_property_readonly("strategy", &PyFleet::strategy)
      .def_property_readonly("inputs", &PyFleet::inputs)
      .def_property_readonly("outputs", &PyFleet::outputs)
      .def("transfer_counters", &PyFleet::transfer_counters,
           "Bytes of tensors that crossed to and from worker processes, by how: host shared memory, CUDA IPC (in place), "
           "or staged through host memory; and how many worker allocations were mapped")
      .def("timeline", &PyFleet::timeline)
      .def("trace", &PyFleet::trace, "The start-up as a Chrome/Perfetto trace (JSON text)")
      .def("shutdown", &PyFleet::shutdown)
      .def("__enter__", [](PyFleet& f) -> PyFleet& { return f; }, py::return_value_policy::reference_internal)
      .def("__exit__", [](PyFleet& f, const py::object&, const py::object&, const py::object&) { f.shutdown(); });

  py::class_<PyPool, std::shared_ptr<PyPool>>(m, "Pool",
                                              "A warm worker pool: per device a worker process with ONNX Runtime, the CUDA EP, "
                                              "cuInit and its context done, waiting for models")
      .def(py::init<const py::object&, const std::string&, bool, size_t, double, bool, bool>(), py::arg("devices") = py::none(),
           py::kw_only(), py::arg("ort_library") = "", py::arg("narrow_workers") = true, py::arg("max_resident_sessions") = 0,
           py::arg("start_timeout") = PoolOptions{}.start_timeout_s, py::arg("prime_libraries") = true,
           py::arg("isolate_new_models") = true,
           "Starts the workers in the background and returns at once (the GIL is released). isolate_new_models: a model new "
           "to the pool makes its first session in a spare worker of its own, so that a crash inside ONNX Runtime cannot end "
           "the sessions other fleets hold (a second warm worker per device)")
      .def("wait", &PyPool::wait, py::arg("timeout") = py::none(), "Block until every worker is ready or failed; True when all are ready")
      .def("status", &PyPool::status, "Devices, workers, resident sessions and memory")
      .def("evict", &PyPool::evict, "Drop every resident session no fleet holds; how many")
      .def_property_readonly("devices", &PyPool::devices)
      .def("close", &PyPool::close)
      .def("__enter__", [](const std::shared_ptr<PyPool>& p) { return p; })
      .def("__exit__", [](PyPool& p, const py::object&, const py::object&, const py::object&) { p.close(); });

  m.def(
      "prewarm",
      [](const py::object& devices, const std::string& ort_library) {
        auto pool = std::make_shared<PyPool>(devices, ort_library, true, 0, PoolOptions{}.start_timeout_s, true, true);
        prewarmed_pool() = pool;
        return pool;
      },
      py::arg("devices") = py::none(), py::arg("ort_library") = "",
      "Start a warm worker pool in the background and return it at once: call it first in a job, before importing "
      "torch or loading data, and every later Fleet whose devices it has starts on it");
  m.def("_forget_prewarmed", [] {
    py::gil_scoped_release release;
    prewarmed_pool().reset();
  });

  m.def("load_runtime", [](const std::string& library) {
    const RuntimeInfo& rt = load_runtime(library);
    py::dict d;
    d["path"] = rt.library_path;
    d["source"] = rt.source;
    d["version"] = rt.version;
    d["providers"] = rt.providers;
    return d;
  }, py::arg("library") = "", "Load ONNX Runtime (the search order of the command line) and describe it");

  m.def("doctor", [](const std::string& ort_library) {
    DoctorReport r;
    {
      py::gil_scoped_release release;
      DoctorOptions o;
      o.ort_library = ort_library;
      r = run_doctor(o);
    }
    return parse_json(r.to_json());
  }, py::arg("ort_library") = "", "What `ortfleet doctor --json` reports, as a dict");

  m.def("bench", [](const std::string& model, const py::object& devices, int runs, int warmup, bool anchors,
                    const std::string& python, const py::object& config) {
    BenchOptions o;
    o.model = model;
    o.devices = to_devices(devices);
    o.runs = runs;
    o.warmup_rounds = warmup;
    o.anchors = anchors;
    o.python = python;
    o.config = to_config(config);
    BenchReport r;
    {
      py::gil_scoped_release release;
      r = run_bench(o);
    }
    return parse_json(r.to_json());
  }, py::arg("model"), py::arg("devices") = py::none(), py::arg("runs") = 3, py::arg("warmup") = 1, py::arg("anchors") = true,
     py::arg("python") = "python3", py::arg("config") = py::none(), "What `ortfleet bench --json` reports, as a dict");

  m.def("profile", [](const std::string& model, const py::object& device, int runs, const py::object& config) {
    ProfileOptions o;
    o.model = model;
    o.device = device.is_none() ? default_device() : to_device(device);
    o.steady_runs = runs;
    o.config = to_config(config);
    ProfileReport r;
    {
      py::gil_scoped_release release;
      r = run_profile(o);
    }
    return parse_json(r.to_json());
  }, py::arg("model"), py::arg("device") = py::none(), py::arg("runs") = 20, py::arg("config") = py::none(),
     "What `ortfleet profile --json` reports, as a dict");

  m.def("tune", [](const std::string& model, const py::object& device, bool quick, int runs, const py::object& config) {
    TuneOptions o;
    o.model = model;
    o.device = device.is_none() ? default_device() : to_device(device);
    o.quick = quick;
    o.steady_runs = runs;
    o.base = to_config(config);
    TuneReport r;
    {
      py::gil_scoped_release release;
      r = run_tune(o);
    }
    return parse_json(r.to_json());
  }, py::arg("model"), py::arg("device") = py::none(), py::arg("quick") = true, py::arg("runs") = 30, py::arg("config") = py::none(),
     "What `ortfleet tune --json` reports, as a dict");

  m.def("synth_mlp", [](const std::string& path, int layers, int width, uint64_t seed) {
    synth::WriteOptions o;
    o.seed = seed;
    return synth::write_mlp(path, {layers, width, 1}, o).path;
  }, py::arg("path"), py::arg("layers") = 3, py::arg("width") = 64, py::arg("seed") = 1);
  m.def("synth_nodes", [](const std::string& path, int nodes, int width, uint64_t seed) {
    synth::NodeHeavySpec spec;
    spec.nodes = nodes;
    spec.width = width;
    synth::WriteOptions o;
    o.seed = seed;
    return synth::write_node_heavy(path, spec, o).path;
  }, py::arg("path"), py::arg("nodes") = 24000, py::arg("width") = 64, py::arg("seed") = 1,
     "A graph of tens of thousands of small nodes (`ortfleet synth nodes`)");
  m.def("synth_resnet", [](const std::string& path, int depth, int image_size, uint64_t seed, bool dynamic_batch) {
    synth::ResNetSpec spec;
    spec.depth = depth;
    spec.image_size = image_size;
    spec.dynamic_batch = dynamic_batch;
    synth::WriteOptions o;
    o.seed = seed;
    return synth::write_resnet(path, spec, o).path;
  }, py::arg("path"), py::arg("depth") = 50, py::arg("image_size") = 224, py::arg("seed") = 1, py::arg("dynamic_batch") = false);

  m.def("synth_segmenter", [](const std::string& path, int channels, int depth, uint64_t seed) {
    synth::SegmenterSpec spec;
    spec.channels = channels;
    spec.depth = depth;
    synth::WriteOptions o;
    o.seed = seed;
    return synth::write_segmenter(path, spec, o).path;
  }, py::arg("path"), py::arg("channels") = 32, py::arg("depth") = 2, py::arg("seed") = 1,
     "A fully convolutional segmentation net with dynamic height and width (`ortfleet synth segmenter`)");

  // A DeviceTensor over a copy of a host array: its DLPack export checked where there is no GPU.
  m.def("_host_device_tensor", [](const py::array& array) {
    auto c = py::array::ensure(array, py::array::c_style);
    std::vector<int64_t> shape(c.shape(), c.shape() + c.ndim());
    return DeviceTensor(Tensor::host_copy("host", numpy_type(c.dtype()), shape, c.data()));
  }, py::arg("array"));
}
