// The `ortfleet` Python module: ortfleet's Fleet and diagnostics for Python jobs (PyTorch and
// others). Every call that does C++ work releases the GIL, so other Python threads keep running
// while sessions start and inferences run.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "ortfleet/diagnostics/bench.hpp"
#include "ortfleet/diagnostics/doctor.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/diagnostics/profile.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/synth/synth.hpp"
#include "ortfleet/diagnostics/tune.hpp"

namespace py = pybind11;
using namespace ortfleet;

namespace {

// --- DLPack (the tensor exchange protocol of PyTorch, CuPy, JAX and NumPy), ABI as published -----
struct DLDevice {
  int32_t device_type;  // 1 = CPU, 2 = CUDA, 3 = CUDA host (pinned)
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
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

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

/// Inputs for one run, and the Python objects and DLPack capsules that keep their memory alive.
struct PreparedInputs {
  std::vector<Tensor> tensors;
  std::vector<py::object> keep_alive;
  std::vector<DLManagedTensor*> consumed;  // returned to their producers (deleter) after the run
  ~PreparedInputs() {
    for (auto* m : consumed) {
      if (m->deleter != nullptr) m->deleter(m);
    }
  }
};

void add_input(PreparedInputs& out, const std::string& name, py::handle value, const std::vector<TensorSpec>& specs) {
  const bool is_numpy = py::isinstance<py::array>(value);
  if (!is_numpy && py::hasattr(value, "__dlpack__")) {
    // torch/CuPy tensors: read in place through DLPack, wherever they live (host or GPU).
    py::object capsule = value.attr("__dlpack__")();
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (managed == nullptr) throw py::error_already_set();
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    out.consumed.push_back(managed);
    const DLTensor& t = managed->dl_tensor;
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
    if (t.device.device_type == 2) device = Device::cuda(t.device.device_id);
    else if (t.device.device_type != 1 && t.device.device_type != 3) {
      throw Error("input '" + name + "' lives on a DLPack device of type " + std::to_string(t.device.device_type),
                  "Give host or CUDA tensors");
    }
    out.tensors.push_back(Tensor::borrow(name, dlpack_type(t.dtype), shape, static_cast<char*>(t.data) + t.byte_offset, device));
    out.keep_alive.push_back(py::reinterpret_borrow<py::object>(value));
    return;
  }
  // numpy arrays, C-contiguous (no copy when already so); anything else (lists, scalars) becomes an
  // array of the type the model declares for this input.
  py::object source = py::reinterpret_borrow<py::object>(value);
  if (!is_numpy) {
    for (const auto& s : specs) {
      if (s.name == name && element_size(s.type) > 0) {
        source = py::module_::import("numpy").attr("asarray")(value, numpy_dtype(s.type));
      }
    }
  }
  auto array = py::array::ensure(source, py::array::c_style);
  if (!array) throw Error("input '" + name + "' is neither an array nor a DLPack tensor");
  std::vector<int64_t> shape(array.shape(), array.shape() + array.ndim());
  out.tensors.push_back(Tensor::borrow(name, numpy_type(array.dtype()), shape, array.mutable_data()));
  out.keep_alive.push_back(array);
}

/// A tensor that stays where it is: on the GPU, handed to torch.from_dlpack / cupy.from_dlpack.
class DeviceTensor {
 public:
  explicit DeviceTensor(Tensor t) : tensor_(std::move(t)) {}
  py::tuple dlpack_device() const { return py::make_tuple(tensor_.on_gpu() ? 2 : 1, tensor_.on_gpu() ? tensor_.device.index : 0); }
  py::capsule dlpack(const py::object& /*stream*/) const {
    struct Holder {
      DLManagedTensor managed;
      Tensor tensor;
      std::vector<int64_t> shape;
    };
    auto* h = new Holder{{}, tensor_, tensor_.shape};
    DLTensor& t = h->managed.dl_tensor;
    t.data = h->tensor.data;
    t.device = {h->tensor.on_gpu() ? 2 : 1, h->tensor.on_gpu() ? h->tensor.device.index : 0};
    t.ndim = static_cast<int32_t>(h->shape.size());
    t.shape = h->shape.data();
    t.strides = nullptr;
    t.byte_offset = 0;
    try {
      t.dtype = dlpack_dtype(tensor_.type);
    } catch (...) {
      delete h;
      throw;
    }
    h->managed.manager_ctx = h;
    h->managed.deleter = [](DLManagedTensor* m) { delete static_cast<Holder*>(m->manager_ctx); };
    return py::capsule(&h->managed, "dltensor", [](PyObject* capsule) {
      // A consumer renames the capsule to "used_dltensor" and owns the tensor; if none did, free it here.
      if (PyCapsule_IsValid(capsule, "dltensor")) {
        auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
        if (m != nullptr && m->deleter != nullptr) m->deleter(m);
      }
    });
  }
  const Tensor& tensor() const { return tensor_; }

 private:
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
    const std::string s = h.cast<std::string>();
    if (s.rfind("cuda:", 0) == 0 || s.rfind("cpu", 0) == 0) return Device::parse(s);
    return Device::parse("cuda:" + s);
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

py::object parse_json(const std::string& text) { return py::module_::import("json").attr("loads")(text); }

py::dict status_dict(const DeviceStatus& s) {
  py::dict d;
  d["device"] = s.device.to_string();
  d["state"] = to_string(s.state);
  d["error"] = s.error;
  d["provider"] = s.provider;
  d["ready_ms"] = s.ready_ms;
  d["pid"] = s.pid;
  d["memory_bytes"] = s.memory_bytes;
  return d;
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

class PyFleet {
 public:
  PyFleet(const std::string& model, const py::object& devices, const std::string& strategy, const py::object& config,
          int warmup, const std::string& ort_library, const std::string& profile_dir) {
    FleetOptions o;
    o.devices = to_devices(devices);
    o.strategy = parse_strategy(strategy);
    o.config = to_config(config);
    o.warmup_runs = warmup;
    o.ort_library = ort_library;
    o.profile_dir = profile_dir;
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
  bool wait() {
    py::gil_scoped_release release;
    return fleet().wait();
  }
  bool ready(const py::object& device) { return fleet().ready(to_device(device)); }
  py::list status() {
    py::list out;
    for (const auto& s : fleet().status()) out.append(status_dict(s));
    return out;
  }
  py::dict run(const py::object& device, const py::dict& inputs, bool outputs_on_device) {
    const Device d = to_device(device);
    PreparedInputs prepared;
    const auto specs = fleet().inputs();
    for (const auto& [name, value] : inputs) add_input(prepared, py::str(name), value, specs);
    std::vector<Tensor> outputs;
    {
      py::gil_scoped_release release;
      outputs = fleet().run(d, prepared.tensors, outputs_on_device);
    }
    py::dict result;
    for (const auto& t : outputs) result[py::str(t.name)] = to_python(t);
    return result;
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
      .def("__dlpack__", &DeviceTensor::dlpack, py::arg("stream") = py::none())
      .def("__dlpack_device__", &DeviceTensor::dlpack_device)
      .def_property_readonly("shape", [](const DeviceTensor& t) { return t.tensor().shape; })
      .def_property_readonly("dtype", [](const DeviceTensor& t) { return to_string(t.tensor().type); });

  py::class_<PyFleet>(m, "Fleet", "One ready ONNX Runtime session per device")
      .def(py::init<const std::string&, const py::object&, const std::string&, const py::object&, int, const std::string&,
                    const std::string&>(),
           py::arg("model"), py::arg("devices") = py::none(), py::arg("strategy") = "auto", py::arg("config") = py::none(),
           py::arg("warmup") = 1, py::arg("ort_library") = "", py::arg("profile_dir") = "")
      .def("start", &PyFleet::start, "Begin starting every device; returns at once (the GIL is released)",
           py::return_value_policy::reference_internal)
      .def("wait", &PyFleet::wait, "Block until every device is ready or failed; True when all are ready")
      .def("ready", &PyFleet::ready, py::arg("device"))
      .def("status", &PyFleet::status)
      .def("run", &PyFleet::run, py::arg("device"), py::arg("inputs"), py::arg("outputs_on_device") = false,
           "Run one inference: inputs maps names to numpy arrays or DLPack tensors (torch, CuPy)")
      .def_property_readonly("devices", &PyFleet::devices)
      .def_property_readonly("strategy", &PyFleet::strategy)
      .def_property_readonly("inputs", &PyFleet::inputs)
      .def_property_readonly("outputs", &PyFleet::outputs)
      .def("timeline", &PyFleet::timeline)
      .def("trace", &PyFleet::trace, "The start-up as a Chrome/Perfetto trace (JSON text)")
      .def("shutdown", &PyFleet::shutdown)
      .def("__enter__", [](PyFleet& f) -> PyFleet& { return f; }, py::return_value_policy::reference_internal)
      .def("__exit__", [](PyFleet& f, const py::object&, const py::object&, const py::object&) { f.shutdown(); });

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

  m.def("profile", [](const std::string& model, const py::object& device, int runs) {
    ProfileOptions o;
    o.model = model;
    o.device = device.is_none() ? default_device() : to_device(device);
    o.steady_runs = runs;
    ProfileReport r;
    {
      py::gil_scoped_release release;
      r = run_profile(o);
    }
    return parse_json(r.to_json());
  }, py::arg("model"), py::arg("device") = py::none(), py::arg("runs") = 20, "What `ortfleet profile --json` reports, as a dict");

  m.def("tune", [](const std::string& model, const py::object& device, bool quick, int runs) {
    TuneOptions o;
    o.model = model;
    o.device = device.is_none() ? default_device() : to_device(device);
    o.quick = quick;
    o.steady_runs = runs;
    TuneReport r;
    {
      py::gil_scoped_release release;
      r = run_tune(o);
    }
    return parse_json(r.to_json());
  }, py::arg("model"), py::arg("device") = py::none(), py::arg("quick") = true, py::arg("runs") = 30,
     "What `ortfleet tune --json` reports, as a dict");

  m.def("synth_mlp", [](const std::string& path, int layers, int width, uint64_t seed) {
    synth::WriteOptions o;
    o.seed = seed;
    return synth::write_mlp(path, {layers, width, 1}, o).path;
  }, py::arg("path"), py::arg("layers") = 3, py::arg("width") = 64, py::arg("seed") = 1);
  m.def("synth_resnet", [](const std::string& path, int depth, int image_size, uint64_t seed) {
    synth::ResNetSpec spec;
    spec.depth = depth;
    spec.image_size = image_size;
    synth::WriteOptions o;
    o.seed = seed;
    return synth::write_resnet(path, spec, o).path;
  }, py::arg("path"), py::arg("depth") = 50, py::arg("image_size") = 224, py::arg("seed") = 1);
}
