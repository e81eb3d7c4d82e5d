#pragma once
// `ortfleet doctor`: everything about this machine that decides whether and how fast ONNX Runtime
// sessions start on its GPUs, each finding with a verdict and the fix; given a model, also whether
// that model starts here (one cold start in a fresh process) and, when it crashes, the next step.
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/options.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet {

enum class Verdict { ok, info, warn, fail };
std::string to_string(Verdict v);

struct Finding {
  std::string check;    ///< "runtime", "gpu", "cuda-ep", "library:libcudnn.so.9", "env:CUDA_MODULE_LOADING", ...
  Verdict verdict = Verdict::ok;
  std::string summary;  ///< one line
  std::string fix;      ///< what to do, when not ok
};

struct LibraryCheck {
  std::string name;         ///< the name ONNX Runtime's CUDA EP asks the loader for
  std::string why;          ///< "needed by the CUDA EP", "loaded on demand (cuDNN)", ...
  bool required = true;
  bool found = false;
  std::string path;         ///< where the loader resolved it
  std::string version;
  std::string error;
};

struct ArchCheck {
  int gpu = 0;
  std::string architecture;  ///< "sm_90"
  std::string support;       ///< "native", "ptx-jit" or "none"
};

struct EnvCheck {
  std::string name;
  std::optional<std::string> value;
};

struct MachineFacts {
  int logical_cpus = 0;
  uint64_t memory_bytes = 0;
  uint64_t shm_bytes = 0;        ///< size of /dev/shm (shared-memory tensor transport)
  std::string kernel;
};

/// `doctor MODEL`: the model's file, and one cold start of it on the device in a fresh process (a
/// crash ends that process, not the doctor).
struct ModelCheck {
  std::string model;
  std::string device;
  ModelFacts facts;          ///< read from the file (nodes, opset, weights, dynamic dims)
  std::string file_error;    ///< why the file is not a model ortfleet can start ("" when it is)
  bool started = false;
  double ready_ms = 0;       ///< exec until the session ran its first inference
  bool crashed = false;      ///< the start was killed by a crash's signal (SIGSEGV, SIGABRT, ...)
  std::string error;         ///< why it did not start
};

struct DoctorReport {
  std::vector<RuntimeCandidate> runtime_candidates;
  std::optional<RuntimeInfo> runtime;
  std::optional<RuntimeTelemetry> telemetry;  ///< whether the loaded runtime collects telemetry
  std::string runtime_error;
  CudaDriverInfo driver;
  std::vector<CudaEpLocation> cuda_ep_candidates;
  std::optional<CudaEpLocation> cuda_ep;
  std::optional<CudaProviderState> provider;
  std::vector<LibraryCheck> libraries;
  std::vector<int> ep_cubin_architectures;
  std::vector<int> ep_ptx_architectures;
  std::vector<ArchCheck> architectures;
  std::vector<EnvCheck> environment;
  MachineFacts machine;
  std::optional<ModelCheck> model;  ///< with a model (DoctorOptions::model)
  std::vector<Finding> findings;

  bool has_failures() const;
  std::string to_json() const;  ///< what `ortfleet doctor --json` prints
};

struct DoctorOptions {
  std::string ort_library;        ///< --ort-lib
  bool register_cuda_ep = true;   ///< load and register the CUDA EP when a GPU is present
  std::string model;              ///< also check that this model starts here ("" = the machine only)
  Device device = Device::cpu();  ///< where the model is started
  RunConfig config;               ///< how its session is made
  std::string ortfleet_executable;  ///< the `ortfleet` that runs the start ("" = the one beside this binary)
  double timeout_s = 600;         ///< the start's deadline
  /// Ends the model's start when requested (Ctrl-C): its child is stopped in order, what it set up (its
  /// config file's folder) is removed, and run_doctor throws "stopped on request".
  std::stop_token stop;
};

DoctorReport run_doctor(const DoctorOptions& options = {});

/// What the doctor says about the GPUs the driver reports (count, MIG, persistence mode).
std::vector<Finding> gpu_findings(const CudaDriverInfo& driver);

}  // namespace ortfleet
