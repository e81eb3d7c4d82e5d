#pragma once
// Plumbing shared by every subcommand: global flags, the run-config flags, error reporting,
// JSON and table output, and the progress line.
#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::cli {

/// Where the pool socket is by default (default_pool_socket()), in words: the help must not depend on
/// who reads it or where.
inline constexpr const char* kDefaultSocketDoc =
    "$XDG_RUNTIME_DIR/ortfleet/pool.sock, else /tmp/ortfleet-<uid>/pool.sock; under Slurm pool-job<SLURM_JOB_ID>.sock";

/// Ends the help of every flag that takes shapes or sizes as text: where their one grammar is shown.
inline constexpr const char* kShapesAndSizesDoc = " (how to write shapes and sizes: docs/inference.md#writing-shapes-and-sizes)";

struct Globals {
  std::string ort_lib;
  bool json = false;
  int verbose = 0;
  bool quiet = false;
  std::string command_line;  ///< as typed, for the results and reports to say how they were made
};

/// What a subcommand does once the command line is parsed; returns the exit code.
using Action = std::function<int()>;

/// Each subcommand registers itself: adds its options to `app` and sets `action`.
void register_doctor(CLI::App& app, Globals& globals, Action& action);
void register_synth(CLI::App& app, Globals& globals, Action& action);
void register_start(CLI::App& app, Globals& globals, Action& action);
void register_bench(CLI::App& app, Globals& globals, Action& action);
void register_profile(CLI::App& app, Globals& globals, Action& action);
void register_tune(CLI::App& app, Globals& globals, Action& action);
void register_cache(CLI::App& app, Globals& globals, Action& action);
void register_serve(CLI::App& app, Globals& globals, Action& action);
void register_report(CLI::App& app, Globals& globals, Action& action);

/// `argv` as one line a shell would run again: arguments with spaces or quotes are single-quoted.
std::string shell_line(int argc, const char* const* argv);

/// A command's JSON result with where it came from (command line, date, machine, ONNX Runtime), for
/// --json and the result files it writes, so `ortfleet report` can say it.
std::string stamped(const std::string& result_json, const Globals& globals, const std::vector<Device>& devices);

/// The numbers a flag takes, checked on its text before CLI11 converts it, so that every refusal is one
/// sentence naming the flag, the value given and what to give instead:
/// "--timeout -1 is out of range: give a number of seconds above 0 and at most 604800".
struct NumberRange {
  double lo = 0;
  double hi = 0;
  const char* unit = "";  ///< "seconds"; "" for a plain count
  bool whole = true;      ///< whole numbers only
  bool above_lo = false;  ///< lo itself is refused (a time limit of 0)
};
/// Attaches `range` to `option`, whose help then shows it ("INT:from 1 to 1000"); returns `option`.
CLI::Option* in_range(CLI::Option* option, NumberRange range);
/// The longest time limit a flag takes: a week.
inline constexpr double kMaxTimeoutS = 7 * 24 * 3600.0;
/// A time limit: more than 0 seconds, at most a week.
NumberRange time_limit();
/// The refusal of a command line CLI11 could not parse, as one line with what to do next.
std::string usage_error_line(const CLI::App& app, const CLI::ParseError& error);

/// --case-timeout SECONDS, shared by bench, profile and tune: each fresh-process case (a start, an
/// anchor) that outlives it is killed and becomes a failed row with the reason.
void add_case_timeout_option(CLI::App* app, double& seconds);
/// The deadline of one case: `given` when set (> 0), else sized to the model: 300 s and 0.6 s per MB
/// of it (weights in external data included), so that a 1.3 GB model gets about 18 minutes.
double case_timeout_s(const std::string& model, double given);

/// An option naming a path the command writes (a file, or a folder when `folder`): an empty value is
/// refused as every bad value is, in one line naming the flag. Every output flag is declared with it.
CLI::Option* add_output_option(CLI::App* app, const std::string& name, std::string& path, const std::string& help, bool folder = false);
/// --html PATH, shared by bench, profile, tune and start.
void add_html_option(CLI::App* app, std::string& path);
/// Writes the page `ortfleet report` would draw from this stamped result to `path` (nothing if empty).
void write_html(const std::string& path, const std::string& stamped_json, const Globals& globals);

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
  void add_to(CLI::App* app);
  /// The config file (or defaults), with the flags given on top.
  RunConfig resolve() const;

 private:
  std::vector<std::function<void(RunConfig&)>> apply_;  // what each flag does to the config, added by add_to
  /// Declares `option` and what it does to the config.
  CLI::Option* flag(CLI::Option* option, std::function<void(RunConfig&)> apply);
  void add_session_flags(CLI::App* app);  ///< the config file, ONNX Runtime's and the CUDA EP's options, the cache, the warm pool
  void add_shape_flags(CLI::App* app);    ///< shapes, batches, buckets, the shape policy
  void add_warmup_flags(CLI::App* app);   ///< real warm-up inputs and the ranges of generated ones
};

/// Runs `body`, turning ortfleet::Error and other exceptions into a one-line message on stderr.
int guarded(const std::function<int()>& body);

void print_json(const nlohmann::json& j);
std::string format_ms(double ms);      ///< "850 ms", "1.23 s", "2 min 3 s"
std::string format_bytes(uint64_t b);  ///< "1.27 GB"

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

/// Refuses, before any work, outputs (flag, path) that would replace the model, the config, the
/// warm-up inputs or a custom-op library the command reads, or each other.
void refuse_overwriting_inputs(const std::vector<std::pair<std::string, std::string>>& outputs, const TargetFlags& target,
                               const RunConfigFlags& config);

/// One status line on stderr, redrawn in place when stderr is a terminal (plain lines otherwise,
/// at most one every few seconds, so logs stay readable).
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void update(const std::string& text);
  void clear();

 private:
  bool enabled_;
  bool tty_;
  bool shown_ = false;
  double last_plain_ = -1e9;
};

/// A text table with aligned columns.
class Table {
 public:
  explicit Table(std::vector<std::string> headers, std::vector<bool> right_aligned = {});
  void add(std::vector<std::string> row);
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace ortfleet::cli
