#include "cli.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "ortfleet/engine/cache.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/number_text.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/report/html_report.hpp"
#include "ortfleet/synth/synth.hpp"

namespace ortfleet::cli {
namespace fs = std::filesystem;

int guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::cerr << "ortfleet: error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "ortfleet: error: " << e.what() << "\n";
  }
  return 1;
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << std::endl; }

std::string shell_line(int argc, const char* const* argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,*+@%") == std::string::npos;
    if (!plain) {
      std::string quoted = "'";
      for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      arg = quoted + "'";
    }
    line += (i == 0 ? "" : " ") + arg;
  }
  return line;
}

std::string stamped(const std::string& result_json, const Globals& globals, const std::vector<Device>& devices) {
  return stamp_result(result_json, globals.command_line, devices, globals.ort_lib);
}

CLI::Option* add_output_option(CLI::App* app, const std::string& name, std::string& path, const std::string& help, bool folder) {
  CLI::Option* option = app->add_option(name, path, help);
  const std::string flag = option->get_positional() ? "the output path" : option->get_name();
  const std::string what = folder ? "a folder" : "a file";
  option->check(CLI::Validator(
      [flag, what](std::string& text) -> std::string { return text.empty() ? flag + " is empty: give the path of " + what + " to write" : std::string(); },
      ""));
  return option;
}

void add_html_option(CLI::App* app, std::string& path) {
  add_output_option(app, "--html", path, "Also draw the results as one self-contained HTML page here (as `ortfleet report` does)");
}

void write_html(const std::string& path, const std::string& stamped_json, const Globals& globals) {
  if (path.empty()) return;
  write_html_report(path, {parse_result(stamped_json, "this run")});
  if (!globals.json) std::cout << "report: " << path << "\n";
}

std::string format_ms(double ms) {
  // Three significant digits: inference latencies of 1.4 ms and 1.6 ms must not both read "2 ms".
  if (ms < 0.1) return fmt::format("{:.1f} us", ms * 1000);
  if (ms < 10) return fmt::format("{:.2f} ms", ms);
  if (ms < 100) return fmt::format("{:.1f} ms", ms);
  if (ms < 1000) return fmt::format("{:.0f} ms", ms);
  if (ms < 60'000) return fmt::format("{:.2f} s", ms / 1000);
  const long long seconds = std::llround(ms / 1000);
  return fmt::format("{} min {} s", seconds / 60, seconds % 60);
}

std::string format_bytes(uint64_t b) {
  const double v = static_cast<double>(b);
  if (b >= 1'000'000'000ULL) return fmt::format("{:.2f} GB", v / 1e9);
  if (b >= 1'000'000ULL) return fmt::format("{:.1f} MB", v / 1e6);
  if (b >= 1'000ULL) return fmt::format("{:.1f} kB", v / 1e3);
  return fmt::format("{} B", b);
}

void TargetFlags::add_to(CLI::App* app, bool one_device) {
  app->add_option("model", model, "The .onnx model (default: the built-in ResNet-50)");
  if (one_device) {
    devices = "auto";
    app->add_option("-d,--device", devices, "One device: 0, cuda:1 or cpu (default: GPU 0, else the CPU)");
  } else {
    devices = "all";
    app->add_option("-d,--devices", devices, "Devices: all (every GPU, else the CPU), 0,1,2, 0-3, cuda:0, cpu, cpu*4");
  }
}

std::string TargetFlags::model_path(bool quiet) const {
  if (!model.empty()) return model;
  const std::string dir = (fs::path(ModelCache::default_root()) / "default-model").string();
  const bool exists = fs::exists(fs::path(dir) / "resnet50-seed1.onnx");
  if (!exists && !quiet) std::cerr << "ortfleet: no model given: writing the built-in default (ResNet-50, 102 MB) to " << dir << "\n";
  return synth::default_model(dir);
}

std::vector<Device> TargetFlags::device_list() const {
  if (devices.find_first_not_of(" \t") == std::string::npos) throw Error("--devices is empty", "Name devices (all, 0,1, cpu) or leave the flag out for all");
  return select_devices(devices).devices;
}

bool TargetFlags::means_all() const {
  const auto first = devices.find_first_not_of(" \t");
  const auto last = devices.find_last_not_of(" \t");
  return first != std::string::npos && devices.substr(first, last - first + 1) == "all";
}

Device TargetFlags::device() const {
  if (devices == "auto") return default_device();
  const auto list = device_list();
  if (list.size() != 1) {
    throw Error("this command takes one device, and '" + devices + "' names " + std::to_string(list.size()),
                "Give one device: 0, cuda:1 or cpu");
  }
  return list.front();
}

namespace {
/// 604800, 0.1, 1e+30: whole numbers as they are typed.
std::string number_text(double v) {
  return v == std::floor(v) && std::fabs(v) < 9e18 ? fmt::format("{}", static_cast<long long>(v)) : fmt::format("{:g}", v);
}

/// What `range` takes, in words: "a whole number from 1 to 1000", "a number of seconds above 0 and at most 604800".
std::string allowed(const NumberRange& range) {
  const std::string what = std::string(range.whole ? "a whole number" : "a number") + (*range.unit != 0 ? std::string(" of ") + range.unit : "");
  if (range.above_lo) return what + " above " + number_text(range.lo) + " and at most " + number_text(range.hi);
  return what + " from " + number_text(range.lo) + " to " + number_text(range.hi);
}
}  // namespace

CLI::Option* in_range(CLI::Option* option, NumberRange range) {
  const std::string name = option->get_name();
  CLI::Validator check(
      [name, range](std::string& text) -> std::string {
        const auto number = parse_decimal(text);
        if (!number) return fmt::format("{} {} is not a number: give {}", name, text, allowed(range));
        const bool digits = text.find_first_not_of("0123456789", text[0] == '-' || text[0] == '+' ? 1 : 0) == std::string::npos;
        if (range.whole && !digits) return fmt::format("{} {} is not a whole number: give {}", name, text, allowed(range));
        const double value = *number;
        const bool inside = (range.above_lo ? value > range.lo : value >= range.lo) && value <= range.hi;
        if (!inside) return fmt::format("{} {} is out of range: give {}", name, text, allowed(range));
        return {};
      },
      fmt::format(fmt::runtime(range.above_lo ? "over {}, up to {}{}" : "from {} to {}{}"), number_text(range.lo), number_text(range.hi),
                  *range.unit != 0 ? std::string(" ") + range.unit : ""));
  return option->check(check);
}

NumberRange time_limit() { return {.lo = 0, .hi = kMaxTimeoutS, .unit = "seconds", .whole = false, .above_lo = true}; }

std::string usage_error_line(const CLI::App& app, const CLI::ParseError& error) {
  // CLI11 says "NAME: MESSAGE"; our range checks name the flag themselves.
  std::string text = error.what();
  if (const auto colon = text.find(": "); colon != std::string::npos && text.compare(colon + 2, colon + 1, text.substr(0, colon) + " ") == 0) {
    text.erase(0, colon + 2);
  }
  std::string command = "ortfleet";
  for (const CLI::App* at = &app; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    command += " " + at->get_name();
  }
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return "ortfleet: error: " + text + " (see `" + command + " --help`)";
}

void add_case_timeout_option(CLI::App* app, double& seconds) {
  in_range(app->add_option("--case-timeout", seconds,
                           "Seconds one case (a fresh-process start or anchor) may take before it is killed and reported as a failed row "
                           "(default: 300 plus 0.6 per MB of the model)"),
           time_limit());
}

double case_timeout_s(const std::string& model, double given) {
  if (given > 0) return given;
  std::error_code ec;
  uint64_t bytes = fs::file_size(model, ec);
  if (ec) bytes = 0;
  const uint64_t data = fs::file_size(model + ".data", ec);
  if (!ec) bytes += data;
  return 300.0 + 0.6 * static_cast<double>(bytes >> 20);
}

CLI::Option* RunConfigFlags::flag(CLI::Option* option, std::function<void(RunConfig&)> apply) {
  apply_.push_back(std::move(apply));
  return option;
}

void RunConfigFlags::add_to(CLI::App* app) {
  // Each flag once: its option, and what it does to the config (run by resolve(), in this order).
  apply_.clear();
  add_session_flags(app);
  add_shape_flags(app);
  add_warmup_flags(app);
}

void RunConfigFlags::add_session_flags(CLI::App* app) {
  app->add_option("--config", config_file, "Config file (from 'ortfleet tune --write-config')")->check(CLI::ExistingFile);
  flag(app->add_option("--conv-algo", conv_algo, "cuDNN conv algorithm search: EXHAUSTIVE, HEURISTIC or DEFAULT"), [this](RunConfig& c) {
    if (!conv_algo.empty()) c.cuda.conv_algo_search = parse_conv_algo_search(conv_algo);
  });
  flag(app->add_option("--graph-opt", graph_opt, "Graph optimisation level: disabled, basic, extended, layout, all"), [this](RunConfig& c) {
    if (!graph_opt.empty()) c.session.graph_optimization = parse_graph_optimization(graph_opt);
  });
  flag(in_range(app->add_option("--intra-threads", intra_threads, "Intra-op threads per session (0 = ONNX Runtime's choice)"), {.lo = 0, .hi = 4096}),
       [this](RunConfig& c) {
         if (intra_threads >= 0) c.session.intra_op_threads = intra_threads;
       });
  flag(in_range(app->add_option("--inter-threads", inter_threads, "Inter-op threads per session"), {.lo = 0, .hi = 4096}), [this](RunConfig& c) {
    if (inter_threads >= 0) c.session.inter_op_threads = inter_threads;
  });
  flag(app->add_flag("--model-cache", model_cache, "Use the cache of pre-optimised models"), [this](RunConfig& c) {
    if (model_cache && no_model_cache) throw Error("--model-cache and --no-model-cache contradict each other");
    if (model_cache) c.session.optimized_model_cache = true;
  });
  flag(app->add_flag("--no-model-cache", no_model_cache, "Never use it (the fleet strategy does by default)"), [this](RunConfig& c) {
    if (no_model_cache) c.session.optimized_model_cache = false;
  });
  flag(app->add_option("--model-cache-format", model_cache_format, "How the model cache stores a graph: auto (default: ort for graphs of 5,000 nodes or more, else onnx), onnx (weights mapped from a side file) or ort (ONNX Runtime's ORT format)")
           ->check(CLI::IsMember({"auto", "onnx", "ort"})),
       [this](RunConfig& c) {
         if (!model_cache_format.empty()) c.session.model_cache_format = parse_model_cache_format(model_cache_format);
       });
  flag(app->add_option("--model-cache-fill", model_cache_fill,
                       "When a missing cache entry is made: background (default: after every device is ready, by a low-priority "
                       "worker, so the start is a plain one), inline (during the start) or off (entries are only read)")
           ->check(CLI::IsMember({"background", "inline", "off"})),
       [this](RunConfig& c) {
         if (!model_cache_fill.empty()) c.session.model_cache_fill = parse_model_cache_fill(model_cache_fill);
       });
  flag(app->add_option("--model-cache-shared", model_cache_shared,
                       "A read-only layer of the model cache looked in before the local one (a cluster file system, an image "
                       "layer; entries checked, never written; default $ORTFLEET_CACHE_SHARED)"),
       [this](RunConfig& c) {
         // Absolute, so that worker processes and a pool started elsewhere find it whatever their folder.
         if (!model_cache_shared.empty()) c.session.model_cache_shared = std::filesystem::absolute(model_cache_shared).string();
       });
  flag(in_range(app->add_option("--warm-pool-idle", warm_pool_idle,
                                "Seconds the warm pool a start leaves on this node waits idle before it exits; 0 leaves none (default 1800 "
                                "where its workers park, else 300; or ORTFLEET_WARM_POOL_IDLE)"),
                {.lo = 0, .hi = kMaxTimeoutS, .unit = "seconds", .whole = false}),
       [this](RunConfig& c) {
         if (warm_pool_idle >= 0) c.warm_pool.idle_exit_s = warm_pool_idle;
       });
  flag(in_range(app->add_option("--warm-pool-park", warm_pool_park,
                                "Seconds after which the warm pool a start leaves parks its GPU workers (their GPU memory released by the "
                                "driver, restored on the next job's request); 0: never (default 30, or ORTFLEET_WARM_POOL_PARK)"),
                {.lo = 0, .hi = kMaxTimeoutS, .unit = "seconds", .whole = false}),
       [this](RunConfig& c) {
         if (warm_pool_park >= 0) c.warm_pool.park_after_s = warm_pool_park;
       });
  flag(app->add_option("--session-config", session_config,
                       "An ONNX Runtime session config entry KEY=VALUE, e.g. session.disable_prepacking=1 (repeatable)"),
       [this](RunConfig& c) {
         for (const auto& entry : session_config) {
           const auto eq = entry.find('=');
           if (eq == std::string::npos || eq == 0) throw Error("--session-config '" + entry + "' is not KEY=VALUE", "e.g. --session-config session.disable_prepacking=1");
           const std::string key = entry.substr(0, eq);
           if (const std::string problem = session_config_entry_problem(key, entry.substr(eq + 1)); !problem.empty()) {
             throw Error("--session-config " + key + " " + problem, "Give it as ONNX Runtime reads it, e.g. --session-config " + key + "=1");
           }
           c.session.config_entries[key] = entry.substr(eq + 1);
         }
       });
  flag(app->add_option("--custom-ops", custom_ops, "A shared library of custom operators the model uses (repeatable)")->check(CLI::ExistingFile),
       [this](RunConfig& c) {
         for (const auto& library : custom_ops) c.session.custom_op_libraries.push_back(std::filesystem::absolute(library).string());
       });
  flag(app->add_flag("--cuda-graph", cuda_graph, "Enable CUDA graph capture in the CUDA EP"), [this](RunConfig& c) {
    if (cuda_graph) c.cuda.cuda_graph = true;
  });
  flag(app->add_option("--module-loading", module_loading, "CUDA_MODULE_LOADING for the sessions' process: LAZY or EAGER"), [this](RunConfig& c) {
    if (module_loading.empty()) return;
    if (module_loading != "LAZY" && module_loading != "EAGER") throw Error("--module-loading takes LAZY or EAGER");
    c.session.cuda_module_loading = module_loading;
  });
}

void RunConfigFlags::add_shape_flags(CLI::App* app) {
  flag(app->add_option("--shapes", shapes,
                       std::string("Input shapes to make and warm up at start-up, each with an ONNX Runtime session of its own: "
                                   "input=1x3x224x224,input=8x3x224x224, or a=1x128,b=1x128 for several inputs") +
                           kShapesAndSizesDoc),
       [this](RunConfig& c) {
         if (!shapes.empty()) c.shapes.declared = parse_shape_list(shapes);
       });
  flag(app->add_option("--batches", batches,
                       std::string("Batch sizes to make and warm up at start-up, for a model whose first dim is dynamic: 1,2,4,8") +
                           kShapesAndSizesDoc),
       [this](RunConfig& c) {
         if (!batches.empty()) c.shapes.batches = parse_batch_list(batches);
       });
  flag(in_range(app->add_option("--max-shape-sessions", max_shape_sessions,
                                "ONNX Runtime sessions per device at most, one per input shape (1: one session for every shape)"),
                {.lo = 1, .hi = kMaxShapeSessions}),
       [this](RunConfig& c) {
         if (max_shape_sessions > 0) c.shapes.max_sessions = max_shape_sessions;
       });
  flag(app->add_option("--buckets", buckets,
                       std::string("Pad a dynamic dim up to the next of a few sizes, outputs cropped back: input.dim=480,640,960 or a "
                                   "range input.dim=320:960:128 (first:last:step); dims sharing its symbolic name pad with it; repeatable, a "
                                   "session per combination, made at start-up") +
                           kShapesAndSizesDoc),
       [this](RunConfig& c) {
         if (buckets.empty()) return;
         c.shapes.buckets.clear();  // the flags replace the config's, as --shapes does
         for (const auto& b : buckets) c.shapes.buckets.push_back(parse_buckets(b));
       });
  flag(app->add_option("--pad-value", pad_values, "The value an input is padded with: input_ids=0 (default 0); repeatable"),
       [this](RunConfig& c) {
         for (const auto& v : pad_values) c.shapes.pad_values.insert_or_assign(parse_pad_value(v).first, parse_pad_value(v).second);
       });
  flag(app->add_option("--shape-policy", shape_policy,
                       "What serves a shape nothing was declared for: measured (one shared session; on a GPU a shape gets its own once its "
                       "switches cost a new session, both priced when they first happen), per-shape (a session per shape, least "
                       "recently used evicted) or shared")
           ->check(CLI::IsMember({"measured", "per-shape", "shared"})),
       [this](RunConfig& c) {
         if (!shape_policy.empty()) c.shapes.policy = parse_shape_policy(shape_policy);
       });
  flag(app->add_flag("--pad-batch", pad_batch, "Pad a batch up to the next declared batch (--batches), outputs sliced back"), [this](RunConfig& c) {
    if (pad_batch) c.shapes.pad_batch = true;
    c.shapes.validate();  // the last of the shapes' flags: every one of them is in
  });
}

void RunConfigFlags::add_warmup_flags(CLI::App* app) {
  flag(app->add_option("--warmup-inputs", warmup_inputs,
                       "Real inputs for warm-up: a .npz file (numpy.savez(FILE, input_name=array, ...)), or a .npy file for a one-input "
                       "model; their shapes are the ones warmed up when no --shapes are given")
           ->check(CLI::ExistingFile),
       [this](RunConfig& c) {
         // Absolute, so that worker processes and child starts find it whatever their folder.
         if (!warmup_inputs.empty()) c.warmup.inputs_file = std::filesystem::absolute(warmup_inputs).string();
       });
  flag(app->add_option("--input-range", input_ranges,
                       "Values of a generated warm-up input: NAME=VALUE (a constant, e.g. sr=16000) or NAME=LO:HI (e.g. input_ids=0:30521); "
                       "repeatable"),
       [this](RunConfig& c) {
         for (const auto& text : input_ranges) {
           auto [input, range] = parse_input_range(text);
           c.warmup.input_ranges[input] = range;
         }
       });
}

void refuse_overwriting_inputs(const std::vector<std::pair<std::string, std::string>>& outputs, const TargetFlags& target,
                               const RunConfigFlags& config) {
  std::vector<std::pair<std::string, std::string>> inputs = {{"the model", target.model},
                                                             {"its external weights", target.model.empty() ? "" : target.model + ".data"},
                                                             {"the config (--config)", config.config_file},
                                                             {"the warm-up inputs (--warmup-inputs)", config.warmup_inputs}};
  for (const auto& library : config.custom_ops) inputs.emplace_back("a custom-op library (--custom-ops)", library);
  refuse_overwriting(outputs, inputs);
}

RunConfig RunConfigFlags::resolve() const {
  RunConfig c = config_file.empty() ? RunConfig{} : RunConfig::load(config_file);
  for (const auto& apply : apply_) apply(c);
  return c;
}

ProgressLine::ProgressLine(bool enabled) : enabled_(enabled), tty_(::isatty(STDERR_FILENO) != 0) {
  // Without a terminal, the first plain line waits a few seconds: short work prints nothing.
  last_plain_ = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::update(const std::string& text) {
  if (!enabled_) return;
  if (tty_) {
    std::cerr << "\r\033[K" << text << std::flush;
    shown_ = true;
    return;
  }
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now - last_plain_ >= 5.0) {
    std::cerr << text << "\n";
    last_plain_ = now;
  }
}

void ProgressLine::clear() {
  if (shown_ && tty_) std::cerr << "\r\033[K" << std::flush;
  shown_ = false;
}

Table::Table(std::vector<std::string> headers, std::vector<bool> right_aligned)
    : headers_(std::move(headers)), right_(std::move(right_aligned)) {
  right_.resize(headers_.size(), false);
}

void Table::add(std::vector<std::string> row) {
  row.resize(headers_.size());
  rows_.push_back(std::move(row));
}

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(headers_.size());
  auto visible = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;  // count UTF-8 code points (×, …)
    return n;
  };
  for (size_t i = 0; i < headers_.size(); ++i) width[i] = visible(headers_[i]);
  for (const auto& r : rows_) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], visible(r[i]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string pad(width[i] - visible(cells[i]), ' ');
      text += right_[i] ? pad + cells[i] : cells[i] + (i + 1 < cells.size() ? pad : "");
      if (i + 1 < cells.size()) text += "  ";
    }
    out << text << "\n";
  };
  line(headers_);
  std::vector<std::string> rule;
  for (size_t w : width) rule.emplace_back(w, '-');
  line(rule);
  for (const auto& r : rows_) line(r);
}

}  // namespace ortfleet::cli
