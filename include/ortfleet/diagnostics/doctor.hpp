#pragma once
// `ortfleet doctor`: everything about this machine that decides whether and how fast ONNX Runtime
// sessions start on its GPUs, each finding with a verdict and the fix.
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
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
  std::vector<Finding> findings;

  bool has_failures() const;
  std::string to_json() const;  ///< what `ortfleet doctor --json` prints
};

struct DoctorOptions {
  std::string ort_library;        ///< --ort-lib
  bool register_cuda_ep = true;   ///< load and register the CUDA EP when a GPU is present
};

DoctorReport run_doctor(const DoctorOptions& options = {});

/// What the doctor says about the GPUs the driver reports (count, MIG, persistence mode).
std::vector<Finding> gpu_findings(const CudaDriverInfo& driver);

}  // namespace ortfleet
