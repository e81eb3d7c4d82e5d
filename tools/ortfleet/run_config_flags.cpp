#include "run_config_flags.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "command.hpp"
#include "ortfleet/engine/config_fields.hpp"
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
  names_.push_back(add_setting_option(app, Setting::config, config_file)->check(CLI::ExistingFile)->get_name());
  for (const SettingRow& row : all_settings()) {
    if (row.scope != SettingScope::config || row.flag == nullptr) continue;
    const bool pool_setting = row.id == Setting::warm_pool_idle || row.id == Setting::warm_pool_park;
    if (pool_setting && !leaves_warm_pool) continue;  // only a start leaves a warm pool
    const bool own_grammar = row.id == Setting::model_cache || row.id == Setting::warmup_inputs;
    if (detail::config_field(row.id) != nullptr && !own_grammar) add_field_flag(app, row.id);
    else add_list_flag(app, row.id);
  }
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

void RunConfigFlags::add_field_flag(CLI::App* app, Setting s) {
  const detail::ConfigField& field = *detail::config_field(s);
  const SettingRow& row = setting_row(s);
  if (row.values.kind == ValueKind::on_off) {
    bool& on = given_[s];
    flag(add_setting_flag(app, s, on), [&field, &on](RunConfig& c) {
      if (on) detail::set_field(field, c, true);
    });
    return;
  }
  std::string& text = texts_[s];
  CLI::Option* option = app->add_option(row.flag, text, row.help);
  if (*row.default_text != 0) option->default_str(row.default_text);  // shown in the help, as the table says it
  if (row.values.kind == ValueKind::whole || row.values.kind == ValueKind::number) {
    checked_by_rule(option->type_name(row.values.kind == ValueKind::whole ? "INT" : "FLOAT"), row.values);
  } else if (row.values.kind == ValueKind::choice) {
    // The words as the config file takes them (EXHAUSTIVE or exhaustive): checked by the field itself.
    const std::string name = row.flag;
    option->check(CLI::Validator(
        [&field, name](std::string& value) -> std::string {
          RunConfig scratch;
          try {
            detail::set_field_from_text(field, scratch, value);
          } catch (const Error&) {
            return fmt::format("{} {} is not {}", name, value, allowed_values(setting_row(field.setting).values));
          }
          return {};
        },
        fmt::format("{{{}}}", fmt::join(value_words(row.values), ","))));
  }
  flag(option, [&field, &text](RunConfig& c) {
    if (text.empty()) return;
    // A path absolute, so that worker processes and a pool started elsewhere find it whatever their folder.
    const bool path = setting_row(field.setting).values.kind == ValueKind::path;
    detail::set_field_from_text(field, c, path ? std::filesystem::absolute(text).string() : text);
  });
}

namespace {
/// A flag given once per value (`--buckets x.2=480,640 --buckets x.3=640,960`): the word after its
/// value is the next flag or the model, never a second value. CLI11 took every following word, so
/// `start --buckets x.2=480,640 model.onnx` read the model as a bucket (and, finding no model, wrote the
/// built-in ResNet-50 to the cache first).
CLI::Option* one_value_each(CLI::Option* option) { return option->allow_extra_args(false); }
}  // namespace

void RunConfigFlags::add_list_flag(CLI::App* app, Setting s) {
  switch (s) {
    case Setting::model_cache:
      flag(add_setting_flag(app, s, given_[s]), [this](RunConfig& c) {
        if (given_[Setting::model_cache]) c.session.optimized_model_cache = true;
      });
      flag(app->add_flag("--no-model-cache", no_model_cache_, "Never use it (the fleet strategy does by default)"), [this](RunConfig& c) {
        if (no_model_cache_) c.session.optimized_model_cache = false;
      });
      return;
    case Setting::warmup_inputs:
      flag(add_setting_option(app, s, warmup_inputs)->check(CLI::ExistingFile), [this](RunConfig& c) {
        // Absolute, so that worker processes and child starts find it whatever their folder.
        if (!warmup_inputs.empty()) c.warmup.inputs_file = std::filesystem::absolute(warmup_inputs).string();
      });
      return;
    case Setting::session_config:
      flag(one_value_each(add_setting_option(app, s, session_config_)), [this](RunConfig& c) {
        for (const auto& entry : session_config_) {
          const auto eq = entry.find('=');
          if (eq == std::string::npos || eq == 0) throw Error("--session-config '" + entry + "' is not KEY=VALUE", "e.g. --session-config session.disable_prepacking=1");
          const std::string key = entry.substr(0, eq);
          if (const std::string problem = session_config_entry_problem(key, entry.substr(eq + 1)); !problem.empty()) {
            throw Error("--session-config " + key + " " + problem, "Give it as ONNX Runtime reads it, e.g. --session-config " + key + "=1");
          }
          c.session.config_entries[key] = entry.substr(eq + 1);
        }
      });
      return;
    case Setting::custom_ops:
      flag(one_value_each(add_setting_option(app, s, custom_ops))->check(CLI::ExistingFile), [this](RunConfig& c) {
        for (const auto& library : custom_ops) c.session.custom_op_libraries.push_back(std::filesystem::absolute(library).string());
      });
      return;
    case Setting::shapes:
      flag(app->add_option(setting_row(s).flag, shapes_, std::string(setting_row(s).help) + kShapesAndSizesDoc), [this](RunConfig& c) {
        if (!shapes_.empty()) c.shapes.declared = parse_shape_list(shapes_);
      });
      return;
    case Setting::batches:
      flag(app->add_option(setting_row(s).flag, batches_, std::string(setting_row(s).help) + kShapesAndSizesDoc), [this](RunConfig& c) {
        if (!batches_.empty()) c.shapes.batches = parse_batch_list(batches_);
      });
      return;
    case Setting::buckets:
      flag(one_value_each(app->add_option(setting_row(s).flag, buckets_, std::string(setting_row(s).help) + kShapesAndSizesDoc)), [this](RunConfig& c) {
        if (buckets_.empty()) return;
        c.shapes.buckets.clear();  // the flags replace the config's, as --shapes does
        for (const auto& b : buckets_) c.shapes.buckets.push_back(parse_buckets(b));
      });
      return;
    case Setting::pad_value:
      flag(one_value_each(add_setting_option(app, s, pad_values_)), [this](RunConfig& c) {
        for (const auto& v : pad_values_) {
          auto [input, value] = parse_pad_value(v);
          c.shapes.pad_values.insert_or_assign(input, value);
        }
      });
      return;
    case Setting::input_range:
      flag(one_value_each(add_setting_option(app, s, input_ranges_)), [this](RunConfig& c) {
        for (const auto& text : input_ranges_) {
          auto [input, range] = parse_input_range(text);
          c.warmup.input_ranges[input] = range;
        }
      });
      return;
    default:
      throw Error(std::string("the setting ") + setting_name(s) + " has a flag and no way to read it",
                  "Give it a field (engine/core/config_fields.cpp) or a case here");
  }
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
  c.shapes.validate();  // every one of the shapes' flags is in
  return c;
}
}  // namespace ortfleet::cli
