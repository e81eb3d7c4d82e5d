// Python arguments as ortfleet's options (arguments.hpp).
#include "arguments.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "setting_words.hpp"

namespace ortfleet::python {

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
  if (devices.is_none()) return select_devices("all").devices;
  if (py::isinstance<py::str>(devices)) return select_devices(devices.cast<std::string>()).devices;
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

py::object parse_json(const std::string& text) { return py::module_::import("json").attr("loads")(in_keywords(text)); }

namespace {

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

/// buckets= of Fleet: {"x.2": [480, 640, 960], "x.3": "320:960:128"} or ["x.2=480,640,960", ...], each
/// read as the text "x.2=480,640,960" is.
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

}  // namespace

void WarmupInputsFile::apply(WarmupOptions& o, const py::object& inputs, const py::object& ranges) {
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
    o.inputs_origin = "the warmup_inputs dict";  // not the temporary file, which the user never made
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

WarmupInputsFile::~WarmupInputsFile() {
  if (!temporary_.empty()) std::remove(temporary_.c_str());
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

}  // namespace ortfleet::python
