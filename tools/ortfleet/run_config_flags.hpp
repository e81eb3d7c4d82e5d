#pragma once
// The flags that say what a command starts: the model and its devices (TargetFlags) and how its
// sessions are made (RunConfigFlags), shared by start, bench, profile, tune, serve, doctor and cache.
#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "flag_checks.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::cli {

/// Flags that adjust a RunConfig, shared by start, bench, profile, tune, serve, doctor and cache: one per
/// key of the config file that has a flag in the settings table (ortfleet/base/settings.hpp), its name,
/// help and check from its row; a key of one value is set through its field (engine/core/config_fields.hpp),
/// the same way the config file and the Python module set it.
struct RunConfigFlags {
  std::string config_file;
  std::string warmup_inputs;              ///< .npz/.npy of real warm-up inputs
  std::vector<std::string> custom_ops;    ///< custom-op libraries
  /// Declares the flags on `app`; this object must stay where it is while `app` parses into it.
  /// `leaves_warm_pool`: the command may leave a warm pool on the node (start), so --warm-pool-idle
  /// means something; elsewhere the flag is not offered.
  void add_to(CLI::App* app, bool leaves_warm_pool = false);
  /// Refuses the flags given that do nothing together (--model-cache-fill with --no-model-cache), as
  /// the command's flag check (FlagChecks) does, before any work.
  void check(const FlagChecks& flags) const;
  /// The first of these flags given on the command line, or "" (for a command that uses them only
  /// with another flag).
  std::string first_given(const FlagChecks& flags) const;
  /// The config file (or defaults), with the flags given on top.
  RunConfig resolve() const;
  /// resolve(), checked against `model` (check_config_against_model: shapes, batches, buckets, warm-up
  /// inputs, input ranges, read from its file), so that a command refuses what the model cannot take
  /// before any work, not at its first session. Throws SettingRefused (exit 2), or ortfleet::Error
  /// when the model file itself is missing or broken.
  RunConfig resolve_for(const std::string& model) const;

 private:
  std::vector<std::function<void(RunConfig&)>> apply_;  // what each flag does to the config, added by add_to
  std::vector<std::string> names_;                        // the flags add_to declared
  std::map<Setting, std::string> texts_;                  // the text of each flag of one value
  std::map<Setting, bool> given_;                         // the flags that take no value
  bool no_model_cache_ = false;
  std::string shapes_;
  std::string batches_;
  std::vector<std::string> session_config_;  ///< KEY=VALUE ONNX Runtime session config entries
  std::vector<std::string> buckets_;         ///< input.dim=sizes, repeatable
  std::vector<std::string> pad_values_;      ///< input=value, repeatable
  std::vector<std::string> input_ranges_;    ///< NAME=VALUE or NAME=LO:HI for generated ones
  /// Declares `option` and what it does to the config.
  CLI::Option* flag(CLI::Option* option, std::function<void(RunConfig&)> apply);
  /// The flag of a key of one value (config_fields.hpp).
  void add_field_flag(CLI::App* app, Setting setting);
  /// The flag of a key of several values (shapes, buckets, config entries, ...), each read by its own grammar.
  void add_list_flag(CLI::App* app, Setting setting);
};

/// The model and the devices a command works on: `MODEL` and `--devices` (several) or `--device` (one).
struct TargetFlags {
  std::string model;
  std::string devices;
  void add_to(CLI::App* app, bool one_device);
  /// The model to use: the one given, or the built-in default (written once into the cache).
  std::string model_path(bool quiet) const;
  /// --devices: "all" is every GPU, else one CPU session. Throws ortfleet::Error for a bad list.
  std::vector<Device> device_list() const;
  /// Whether --devices is "all" (as given or left out).
  bool means_all() const;
  /// --device: "auto" is GPU 0 if there is a GPU, else the CPU; more than one is an error.
  Device device() const;
};

/// With -v: what a command is about to run, said once as it begins: the model (size, nodes, inputs
/// and their dynamic dims), the devices asked for and the session settings.
void say_what_runs(const std::string& model, const std::string& devices, const RunConfig& config);

/// -d,--devices (commands of several devices) or -d,--device (commands of one): one flag under both
/// names on every command, the other name its alias, which the help says.
CLI::Option* add_devices_option(CLI::App* app, std::string& devices, bool one_device, const std::string& help);

/// Refuses, before any work, outputs (flag, path) that would replace the model, the config, the
/// warm-up inputs or a custom-op library the command reads, or each other.
void refuse_overwriting_inputs(const std::vector<std::pair<std::string, std::string>>& outputs, const TargetFlags& target,
                               const RunConfigFlags& config);

}  // namespace ortfleet::cli
