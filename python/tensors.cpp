// Tensors between Python and ortfleet (tensors.hpp): the DLPack exchange protocol (PyTorch, CuPy, JAX,
// NumPy) both ways, and numpy arrays.
#include "tensors.hpp"

#include <pybind11/numpy.h>

#include <type_traits>

#include "bindings.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::python {

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

}  // namespace

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

PreparedInputs::PreparedInputs() = default;
PreparedInputs::~PreparedInputs() = default;
PreparedInputs::PreparedInputs(PreparedInputs&&) noexcept = default;
PreparedInputs& PreparedInputs::operator=(PreparedInputs&&) noexcept = default;

namespace {

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

}  // namespace

void add_input(PreparedInputs& out, const std::string& name, py::handle value, const std::vector<TensorSpec>& specs) {
  if (value.is_none()) throw Error("input '" + name + "' is None: give a numpy array or a DLPack tensor");
  const bool dlpack = !py::isinstance<py::array>(value) && py::hasattr(value, "__dlpack__");
  out.tensors.push_back(dlpack ? consume_dlpack(out, name, value) : numpy_input(out, name, value, specs));
}

namespace {

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

}  // namespace

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

void bind_tensors(py::module_& m) {
  py::class_<DeviceTensor>(m, "DeviceTensor", "An output left on its GPU; pass it to torch.from_dlpack or cupy.from_dlpack")
      .def("__dlpack__", &DeviceTensor::dlpack, py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
           py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
           "A DLPack capsule over the output, in place (DLPack 1.x when max_version asks for it)")
      .def("__dlpack_device__", &DeviceTensor::dlpack_device)
      .def_property_readonly("shape", [](const DeviceTensor& t) { return t.tensor().shape; })
      .def_property_readonly("dtype", [](const DeviceTensor& t) { return to_string(t.tensor().type); });
  // A DeviceTensor over a copy of a host array: its DLPack export checked where there is no GPU.
  m.def("_host_device_tensor", [](const py::array& array) {
    auto c = py::array::ensure(array, py::array::c_style);
    std::vector<int64_t> shape(c.shape(), c.shape() + c.ndim());
    return DeviceTensor(Tensor::host_copy("host", numpy_type(c.dtype()), shape, c.data()));
  }, py::arg("array"));
}

}  // namespace ortfleet::python
