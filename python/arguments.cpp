// Python arguments as ortfleet's options (arguments.hpp).
#include "arguments.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "ortfleet/base/closest_name.hpp"
#include "ortfleet/engine/config_fields.hpp"
#include "pool.hpp"
#include "setting_words.hpp"

namespace ortfleet::python {

std::optional<long long> device_number(const py::handle& h) {
  int overflow = 0;
  const long long i = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow != 0) return std::nullopt;
  return i;
}

Device to_device(const py::handle& h) {
  if (py::isinstance<py::int_>(h)) {
    const auto i = device_number(h);
    if (!i || *i < 0 || *i > std::numeric_limits<int>::max()) {
      throw Error("device " + py::repr(h).cast<std::string>() + " is no GPU ordinal: device numbers are GPU ordinals from 0", "Use 0, 1, ... or \"cpu\"");
    }
    return Device::cuda(static_cast<int>(*i));
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
    if (d.is_cuda() && d.index >= gpus) parse_devices(std::to_string(d.index), gpus);  // the error naming the GPUs there are
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

/// pad_values= of Fleet: {"input_ids": 0}.
std::map<std::string, double> to_pad_values(const py::object& pad_values) {
  if (!py::isinstance<py::dict>(pad_values)) throw Error("pad_values must be a dict of input name -> number, not " + py::repr(pad_values).cast<std::string>());
  std::map<std::string, double> out;
  for (const auto& [name, v] : pad_values.cast<py::dict>()) {
    if (!py::isinstance<py::int_>(v) && !py::isinstance<py::float_>(v)) {
      throw Error("pad value of '" + py::str(name).cast<std::string>() + "' must be a number, not " + py::repr(v).cast<std::string>());
    }
    out[py::str(name).cast<std::string>()] = v.cast<double>();
  }
  return out;
}

/// pool= of Fleet: None (the pool ortfleet.prewarm() started is the fleet's preferred pool: it starts there
/// when the pool has every device), False (no pool at all), an ortfleet.Pool, or the socket of a pool
/// server. Whether a pool is used is the fleet's to decide (FleetOptions::preferred_pool, auto_pool).
void choose_pool(FleetOptions& o, const py::object& pool) {
  if (pool.is_none()) {
    if (const auto& prewarmed = prewarmed_pool()) o.preferred_pool = prewarmed->shared();
    return;
  }
  if (py::isinstance<py::bool_>(pool)) {
    if (pool.cast<bool>()) throw Error("pool=True is not a pool", "Pass an ortfleet.Pool, a pool socket path, None or False");
    o.auto_pool = false;  // no pool at all: neither the node's warm pool nor one left behind
    return;
  }
  if (py::isinstance<py::str>(pool)) {
    o.pool_socket = checked_text(Setting::pool, pool.cast<std::string>());
    return;
  }
  if (!py::isinstance<PyPool>(pool)) {
    throw Error("pool is an ortfleet.Pool, a pool socket path, None or False, not " + py::repr(pool).cast<std::string>());
  }
  o.pool = pool.cast<PyPool&>().shared();
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
    written_by_ = ::getpid();
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
  // Only by the process that wrote it: a child forked from it drops its copy, and the parent's workers
  // may still read the file.
  if (!temporary_.empty() && ::getpid() == written_by_) std::remove(temporary_.c_str());
}

bool is_fleet_keyword(const SettingRow& row) {
  return row.keyword != nullptr && (row.scope == SettingScope::fleet || row.scope == SettingScope::config) && row.id != Setting::model &&
         row.id != Setting::devices;
}

namespace {

/// The type of a keyword in Fleet's signature, as pybind11 writes types (what _calls.py checks a value against).
std::string python_type(const SettingRow& row) {
  if (row.python_type != nullptr) return row.python_type;
  std::string type = "object";
  switch (row.values.kind) {
    case ValueKind::on_off: type = "bool"; break;
    case ValueKind::whole: type = "int"; break;
    case ValueKind::number: type = "float"; break;
    case ValueKind::choice:
    case ValueKind::path: type = "str"; break;
    default: break;
  }
  return row.python_default == nullptr && type != "object" ? "Optional[" + type + "]" : type;
}

/// `value` of `keyword` (which takes what `rule` says) as a config field takes it: a bool, a number or a text.
detail::FieldValue field_value(const char* keyword, const ValueRule& rule, const py::handle& value) {
  if (py::isinstance<py::bool_>(value) || std::string(py::str(py::type::of(value).attr("__name__"))) == "bool_") return value.cast<bool>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (PyNumber_Check(value.ptr()) != 0) {
    const double number = PyFloat_AsDouble(value.ptr());
    if (number == -1.0 && PyErr_Occurred() != nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw py::error_already_set();
      PyErr_Clear();  // an int too large for a double: out of every range
      return std::numeric_limits<double>::infinity();
    }
    return number;
  }
  throw Error(std::string(keyword) + " takes " + allowed_values(rule) + ", not " + py::repr(value).cast<std::string>());
}

/// `value` of `keyword` as a number, not yet checked against `rule`'s range: a bool or a text is refused.
double unchecked_number(const char* keyword, const ValueRule& rule, const py::handle& value) {
  const detail::FieldValue v = field_value(keyword, rule, value);
  const auto* number = std::get_if<double>(&v);
  if (number == nullptr) throw Error(std::string(keyword) + " takes " + allowed_values(rule) + ", not " + py::repr(value).cast<std::string>());
  return *number;
}

/// A keyword of a number, checked by its row: what the command line's flag takes, the same way.
double number_keyword(const SettingRow& row, const py::handle& value) {
  return checked_number(row.id, unchecked_number(row.keyword, row.values, value));
}

bool bool_keyword(const SettingRow& row, const py::handle& value) {
  const detail::FieldValue v = field_value(row.keyword, row.values, value);
  if (!std::holds_alternative<bool>(v)) throw Error(std::string(row.keyword) + " takes True or False, not " + py::repr(value).cast<std::string>());
  return std::get<bool>(v);
}

std::string text_keyword(const SettingRow& row, const py::handle& value) {
  if (!py::isinstance<py::str>(value)) throw Error(std::string(row.keyword) + " takes a str, not " + py::repr(value).cast<std::string>());
  return checked_text(row.id, value.cast<std::string>());
}

}  // namespace

double number_argument(const char* keyword, const ValueRule& rule, const py::handle& value) {
  const double number = unchecked_number(keyword, rule, value);
  if (const std::string problem = number_problem(rule, number); !problem.empty()) {
    throw Error(fmt::format("{}={} {}", keyword, number_words(number), problem));
  }
  return number;
}

FleetOptions fleet_options(const py::object& devices, const py::kwargs& keywords, WarmupInputsFile& warmup_file) {
  std::map<Setting, py::object> given;
  std::vector<std::string> names;
  for (const auto& row : all_settings()) {
    if (is_fleet_keyword(row)) names.emplace_back(row.keyword);
  }
  for (const auto& [key, value] : keywords) {
    const std::string name = py::str(key);
    const auto setting = setting_of_keyword(name);
    if (!setting || !is_fleet_keyword(setting_row(*setting))) {
      const auto meant = detail::closest_name(name, names);
      throw Error("Fleet() got an unexpected keyword argument '" + name + "'" + (meant ? "; did you mean '" + *meant + "'?" : ""));
    }
    if (!value.is_none()) given[*setting] = py::reinterpret_borrow<py::object>(value);
  }
  const auto value_of = [&](Setting s) { return given.count(s) != 0 ? given.at(s) : py::none(); };

  FleetOptions o;
  o.devices = to_devices(devices);
  o.config = to_config(value_of(Setting::config));  // first: each keyword given replaces what it says
  o.no_warm_pool_advice = "Fleet(..., warm_pool_idle=0) or Fleet(..., pool=False) leaves none, ortfleet.pool_stop() stops it";
  warmup_file.apply(o.config.warmup, value_of(Setting::warmup_inputs), value_of(Setting::input_range));
  for (const auto& [setting, value] : given) {
    const SettingRow& row = setting_row(setting);
    switch (setting) {
      case Setting::config:
      case Setting::warmup_inputs:
      case Setting::input_range: break;  // above
      case Setting::strategy: o.strategy = parse_strategy(text_keyword(row, value)); break;
      case Setting::warmup_runs: o.warmup_runs = static_cast<int>(number_keyword(row, value)); break;
      case Setting::start_timeout: o.start_timeout_s = number_keyword(row, value); break;
      case Setting::run_timeout: o.run_timeout_s = number_keyword(row, value); break;
      case Setting::ort_library: o.ort_library = text_keyword(row, value); break;
      case Setting::profile_dir: o.profile_dir = text_keyword(row, value); break;
      case Setting::narrow_workers: o.narrow_workers = bool_keyword(row, value); break;
      case Setting::one_process: o.one_process = bool_keyword(row, value); break;
      case Setting::pool: choose_pool(o, value); break;
      case Setting::shapes: o.config.shapes.declared = to_shape_list(value); break;
      case Setting::batches: o.config.shapes.batches = to_batch_list(value); break;
      case Setting::buckets: o.config.shapes.buckets = to_buckets(value); break;
      case Setting::pad_value: o.config.shapes.pad_values = to_pad_values(value); break;
      default: {
        const detail::ConfigField* field = detail::config_field(setting);
        if (field == nullptr) throw Error(std::string("Fleet() has no way to apply its keyword ") + row.keyword, "Report it: the settings table lists it");
        detail::set_field(*field, o.config, field_value(row.keyword, row.values, value));
      }
    }
  }
  if (given.count(Setting::pool) == 0) choose_pool(o, py::none());
  o.config.shapes.validate();
  return o;
}

std::string fleet_docstring() {
  std::string signature = "__init__(self: ortfleet._ortfleet.Fleet, model: str, devices: object = None, *";
  std::string doc;
  for (const auto& row : all_settings()) {
    if (!is_fleet_keyword(row)) continue;
    signature += fmt::format(", {}: {} = {}", row.keyword, python_type(row), row.python_default != nullptr ? row.python_default : "None");
    doc += fmt::format("\n{}: {}", row.keyword, in_keywords(row.python_help != nullptr ? row.python_help : row.help));
  }
  return signature + ") -> None\n\nOne ready ONNX Runtime session per device: model, the .onnx file; devices: " +
         in_keywords(setting_row(Setting::devices).python_help) + ". Its keywords (each replaces what the config says):" + doc;
}

}  // namespace ortfleet::python
