#pragma once
// `ortfleet doctor MODEL --locate-crash`: finds the first node whose execution crashes ONNX Runtime
// (a SIGSEGV or an abort inside an execution provider), by running prefixes of the model's graph in
// fresh processes and bisecting, each try with a deadline. It writes the smallest model that still
// crashes, with its inputs, for a bug report, and the command that reproduces it. Then it tries what
// ortfleet can change itself, each in a fresh process on the device, and keeps the first whose outputs
// match the CPU EP's: the crashing node, then every node of its op, then every node of each other op
// of the crashing prefix, run on the CPU EP inside the same session (ONNX Runtime 1.29's
// session.name_based_layer_assignment).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

struct CrashLocateOptions {
  std::string model;
  Device device = Device::cpu();
  RunConfig config;              ///< as the crashing start used it (warm-up inputs, custom ops, ...)
  std::string out_dir;           ///< where the cut models go ("" = <model stem>-crash in the current folder)
  double try_timeout_s = 120;    ///< one try's deadline: a try that outlives it counts as a hang, not a crash
  std::string ortfleet_path;     ///< the `ortfleet` to run the tries with ("" = the one beside this binary)
  std::function<void(const std::string&)> progress;  ///< one line per try
};

/// What one value looked like where the crashing node reads or writes it.
struct ValueSummary {
  std::string name;
  std::string type;   ///< "float32"; "" when unknown
  std::string shape;  ///< "[1, 3, 224, 224]"; "" when unknown
};

struct CrashNode {
  size_t index = 0;  ///< in the graph's execution order
  std::string name;
  std::string op_type;
  std::string domain;
  int64_t opset = 0;
  std::vector<std::string> attributes;
  std::vector<ValueSummary> inputs;
  std::vector<ValueSummary> outputs;
  std::string on_cpu;  ///< what the smallest model does on the CPU EP: "runs", "crashes (SIGSEGV)", "fails: ..."
};

/// One work-around tried, in a fresh process on the device, on the model's own inputs.
struct WorkaroundTry {
  std::string what;          ///< "/stage1/Resize on the CPU EP", "every Resize node (39) on the CPU EP"
  std::string config_key;    ///< the session config entry it sets
  std::string config_value;  ///< "cpu(/stage1/Resize)"
  std::string outcome;       ///< "crashes (...)", "fails: ...", "outputs differ from the CPU EP's: ...", "outputs match the CPU EP's (...)"
  bool works = false;
};

struct CrashLocation {
  std::string model;
  std::string device;
  bool crashed = false;           ///< whether the whole model crashed at all
  std::string how;                ///< "was killed by signal SIGSEGV (...)", "timed out", "exited with code 1: ..."
  size_t nodes = 0;
  int tries = 0;
  double seconds = 0;
  std::optional<CrashNode> node;
  std::string smallest_model;     ///< the smallest model that still crashes
  std::string smallest_inputs;    ///< its inputs (.npz)
  std::string reproduce;          ///< the command that shows the crash
  std::vector<WorkaroundTry> workarounds;  ///< in the order tried; the last one works when any does
  std::string workaround_config;  ///< a config file with the working one (the start's config plus it), "" when none works
  std::vector<std::string> notes;
  std::string to_json() const;
};

/// Throws ortfleet::Error when the model cannot be read or no try can be started at all.
CrashLocation locate_crash(const CrashLocateOptions& options);

/// One try, in the process that runs it: a session of `model` on `device`, one run on its warm-up
/// inputs, with the inputs saved to DIR/inputs.npz before the run and the outputs to DIR/outputs.npz
/// after it. What `ortfleet doctor MODEL --crash-step DIR` does for locate_crash.
void run_crash_step(const std::string& model, const Device& device, const RunConfig& config, const std::string& dir);

}  // namespace ortfleet
