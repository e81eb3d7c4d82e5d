#include "run_config_flags.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "command.hpp"
#include "flag_checks.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "output.hpp"
#include "ortfleet/synth/synth.hpp"

namespace ortfleet::cli {
namespace fs = std::filesystem;

CLI::Option* add_devices_option(CLI::App* app, std::string& devices, bool one_device, const std::string& help) {
  // One parenthesis for the alias and the default (the help's formatter adds none where it is said).
  const std::string alias = one_device ? "--devices is the same flag" : "--device is the same flag";
  const bool says_default = help.find("default") != std::string::npos;
  return app->add_option(one_device ? "-d,--device,--devices" : "-d,--devices,--device", devices,
                         help + " (" + (says_default ? alias : "default " + devices + "; " + alias) + ")");
}

void TargetFlags::add_to(CLI::App* app, bool one_device) {
  app->add_option("model", model, "The .onnx model (default: the built-in ResNet-50)");
  if (one_device) {
    devices = "auto";
    add_devices_option(app, devices, true, "One device: 0, cuda:1 or cpu (default: GPU 0, else the CPU)");
  } else {
    devices = "all";
    add_devices_option(app, devices, false, "Devices: all (every GPU, else the CPU), 0,1,2, 0-3, cuda:0, cpu, cpu*4");
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
  if (devices.find_first_not_of(" \t") == std::string::npos) {
    throw SettingRefused(Error("--devices is empty", "Name devices (all, 0,1, cpu) or leave the flag out for all"));
  }
  try {
    return select_devices(devices).devices;
  } catch (const Error& e) {
    // A list the user wrote that names what this machine lacks is a bad value of the flag: a usage error
    // (exit 2). "all" under a Slurm allocation that cannot be read is not the command line's fault.
    if (means_all()) throw;
    throw SettingRefused(e);
  }
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
    throw SettingRefused(Error("this command takes one device, and '" + devices + "' names " + std::to_string(list.size()),
                               "Give one device: 0, cuda:1 or cpu"));
  }
  return list.front();
}
CLI::Option* RunConfigFlags::flag(CLI::Option* option, std::function<void(RunConfig&)> apply) {
  apply_.push_back(std::move(apply));
  names_.push_back(option->get_name());
  return option;
}

void RunConfigFlags::add_to(CLI::App* app, bool leaves_warm_pool) {
  // Each flag once: its option, and what it does to the config (run by resolve(), in this order).
  apply_.clear();
  names_.clear();
  add_session_flags(app, leaves_warm_pool);
  add_shape_flags(app);
  add_warmup_flags(app);
}

void RunConfigFlags::check(const FlagChecks& flags) const {
  flags.excludes("--model-cache", "--no-model-cache", "they contradict each other");
  for (const char* cache_flag : {"--model-cache-fill", "--model-cache-format", "--model-cache-shared"}) {
    flags.excludes(cache_flag, "--no-model-cache", "no cache is read or made");
  }
  // Padding values pad what buckets or padded batches pad (a config file may declare those).
  if (flags.given("--pad-value") && flags.first_given({"--buckets", "--pad-batch", "--config"}).empty()) {
    FlagChecks::refuse("--pad-value does nothing without --buckets or --pad-batch: add one, or leave --pad-value out");
  }
}

std::string RunConfigFlags::first_given(const FlagChecks& flags) const {
  for (const auto& name : names_) {
    if (flags.given(name)) return name;
  }
  return {};
}

void RunConfigFlags::add_session_flags(CLI::App* app, bool leaves_warm_pool) {
  names_.push_back(app->add_option("--config", config_file, "Config file (from 'ortfleet tune --write-config')")->check(CLI::ExistingFile)->get_name());
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
  if (leaves_warm_pool) {
    // A seconds flag of the warm pool a start leaves: set, it replaces that field of the config's warm_pool.
    const auto pool_seconds = [&](const std::string& name, double& seconds, std::optional<double> WarmPoolOptions::*field,
                                  const std::string& help) {
      flag(in_range(app->add_option(name, seconds, help), {.lo = 0, .hi = kMaxTimeoutS, .unit = "seconds", .whole = false}),
           [&seconds, field](RunConfig& c) {
             if (seconds >= 0) c.warm_pool.*field = seconds;
           });
    };
    pool_seconds("--warm-pool-idle", warm_pool_idle, &WarmPoolOptions::idle_exit_s,
                 "Seconds the warm pool a start (--strategy auto) leaves on this node waits idle before it exits; 0 leaves none "
                 "(default 1800 where its workers park, else 300; or ORTFLEET_WARM_POOL_IDLE)");
    pool_seconds("--warm-pool-park", warm_pool_park, &WarmPoolOptions::park_after_s,
                 "Seconds after which the warm pool a start leaves parks its GPU workers (their GPU memory released by the "
                 "driver, restored on the next job's request); 0: never (default 30, or ORTFLEET_WARM_POOL_PARK)");
  }
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
                                "ONNX Runtime sessions per device at most, one per input shape (1: one session for every shape; default 8)"),
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

void say_what_runs(const std::string& model, const std::string& devices, const RunConfig& config) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  try {
    const ModelFacts facts = inspect_model(model);
    std::string inputs;
    for (const auto& spec : facts.input_specs) {
      std::string dims;
      for (size_t i = 0; i < spec.shape.size(); ++i) {
        dims += (i ? "x" : "") + (spec.shape[i] >= 0 ? std::to_string(spec.shape[i]) : spec.dim_names[i].empty() ? "?" : spec.dim_names[i]);
      }
      inputs += (inputs.empty() ? "" : ", ") + spec.name + " " + dims;
    }
    spdlog::debug("model {}: {} nodes, {} of weights{}; inputs {}", model, facts.nodes, bytes_text(facts.initializer_bytes),
                  facts.external_data ? " (external data)" : "", inputs.empty() ? "none" : inputs);
  } catch (const std::exception& e) {
    spdlog::debug("model {}: not read ({})", model, e.what());
  }
  spdlog::debug("devices {}; sessions: {}", devices, config.summary());
}

RunConfig RunConfigFlags::resolve_for(const std::string& model) const {
  RunConfig c = resolve();
  try {
    check_config_against_model(c, model);
  } catch (const Error& e) {
    validate_model_file(model);  // a missing or broken model is an error of its own (exit 1), not a refused setting
    throw SettingRefused(e);
  }
  return c;
}

RunConfig RunConfigFlags::resolve() const {
  RunConfig c = config_file.empty() ? RunConfig{} : RunConfig::load(config_file);
  for (const auto& apply : apply_) apply(c);
  return c;
}
}  // namespace ortfleet::cli
