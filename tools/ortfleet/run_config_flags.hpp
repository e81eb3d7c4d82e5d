#pragma once
// The flags that say what a command starts: the model and its devices (TargetFlags) and how its
// sessions are made (RunConfigFlags), shared by start, bench, profile, tune, serve, doctor and cache.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "flag_checks.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::cli {

/// Flags that adjust a RunConfig, shared by start, bench, profile and tune.
struct RunConfigFlags {
  std::string config_file;
  std::string conv_algo;
  std::string graph_opt;
  int intra_threads = -1;
  int inter_threads = -1;
  bool model_cache = false;
  bool no_model_cache = false;
  bool cuda_graph = false;
  std::string module_loading;
  std::string model_cache_format;      ///< "" (the config's), onnx or ort
  std::string model_cache_fill;        ///< "" (the config's), background, inline or off
  std::string tiered_start;            ///< "" (the config's), auto, on or off
  std::string model_cache_shared;      ///< "" (the config's, else $ORTFLEET_CACHE_SHARED)
  double warm_pool_idle = -1;          ///< < 0: the config's (or the environment's)
  double warm_pool_park = -1;          ///< < 0: the config's (or the environment's)
  std::vector<std::string> session_config;  ///< KEY=VALUE ONNX Runtime session config entries
  std::vector<std::string> custom_ops;      ///< custom-op libraries
  std::string shapes;
  std::string batches;
  int max_shape_sessions = 0;
  bool pad_batch = false;
  std::vector<std::string> buckets;     ///< input.dim=sizes, repeatable
  std::vector<std::string> pad_values;  ///< input=value, repeatable
  std::string shape_policy;             ///< "" (the config's), measured, per-shape, shared
  std::string warmup_inputs;              ///< .npz/.npy of real warm-up inputs
  std::vector<std::string> input_ranges;  ///< NAME=VALUE or NAME=LO:HI for generated ones
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
  /// Declares `option` and what it does to the config.
  CLI::Option* flag(CLI::Option* option, std::function<void(RunConfig&)> apply);
  void add_session_flags(CLI::App* app, bool leaves_warm_pool);  ///< the config file, ONNX Runtime's and the CUDA EP's options, the cache, the warm pool
  void add_shape_flags(CLI::App* app);    ///< shapes, batches, buckets, the shape policy
  void add_warmup_flags(CLI::App* app);   ///< real warm-up inputs and the ranges of generated ones
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
