#include "ortfleet/diagnostics/doctor.hpp"

#include <dlfcn.h>
#include <link.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "base/environment.hpp"
#include "diagnostics/doctor_model.hpp"
#include "diagnostics/elf_inspect.hpp"
#include "engine/cuda/process_checkpoint.hpp"
#include "ortfleet/base/error.hpp"
#include "base/system_paths.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/cuda_devices.hpp"

namespace ortfleet {
using nlohmann::json;

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::info: return "info";
    case Verdict::warn: return "warn";
    case Verdict::fail: return "fail";
  }
  return "?";
}

bool DoctorReport::has_failures() const {
  return std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.verdict == Verdict::fail; });
}

namespace {

std::string sm_name(int sm) { return "sm_" + std::to_string(sm); }

std::string join(const std::vector<int>& archs) {
  std::string out;
  for (int a : archs) {
    if (!out.empty()) out += ' ';
    out += sm_name(a);
  }
  return out.empty() ? "none" : out;
}

/// How to ask a CUDA library for its version, by library name prefix.
std::string library_version(void* handle, const std::string& name) {
  if (name.rfind("libcudart", 0) == 0) {
    if (auto f = reinterpret_cast<int (*)(int*)>(dlsym(handle, "cudaRuntimeGetVersion"))) {
      int v = 0;
      if (f(&v) == 0) return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    }
  } else if (name.rfind("libcublasLt", 0) == 0) {
    if (auto f = reinterpret_cast<size_t (*)()>(dlsym(handle, "cublasLtGetVersion"))) {
      const size_t v = f();
      return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
    }
  } else if (name.rfind("libcublas", 0) == 0) {
    if (auto f = reinterpret_cast<int (*)(int, int*)>(dlsym(handle, "cublasGetProperty"))) {
      int major = 0, minor = 0, patch = 0;
      if (f(0, &major) == 0 && f(1, &minor) == 0 && f(2, &patch) == 0) {
        return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
      }
    }
  } else if (name.rfind("libcudnn", 0) == 0) {
    if (auto f = reinterpret_cast<size_t (*)()>(dlsym(handle, "cudnnGetVersion"))) {
      const size_t v = f();  // 9.x: major*10000 + minor*100 + patch
      return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
    }
  } else if (name.rfind("libcurand", 0) == 0 || name.rfind("libcufft", 0) == 0) {
    const char* symbol = name.rfind("libcurand", 0) == 0 ? "curandGetVersion" : "cufftGetVersion";
    if (auto f = reinterpret_cast<int (*)(int*)>(dlsym(handle, symbol))) {
      int v = 0;
      if (f(&v) == 0) return std::to_string(v);
    }
  } else if (name.rfind("libnvrtc", 0) == 0) {
    if (auto f = reinterpret_cast<int (*)(int*, int*)>(dlsym(handle, "nvrtcVersion"))) {
      int major = 0, minor = 0;
      if (f(&major, &minor) == 0) return std::to_string(major) + "." + std::to_string(minor);
    }
  } else if (name.rfind("libcuda.so", 0) == 0) {
    if (auto f = reinterpret_cast<int (*)(int*)>(dlsym(handle, "cuDriverGetVersion"))) {
      int v = 0;
      if (f(&v) == 0) return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    }
  }
  return {};
}

LibraryCheck check_library(const std::string& name, const std::string& why, bool required) {
  LibraryCheck check{name, why, required, false, {}, {}, {}};
  dlerror();
  void* handle = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    check.error = e ? e : "not found";
    return check;
  }
  check.found = true;
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr) check.path = map->l_name;
  check.version = library_version(handle, name);
  return check;  // left loaded: harmless, and ONNX Runtime would load it anyway
}

void check_runtime(DoctorReport& r, const DoctorOptions& options) {
  r.runtime_candidates = runtime_candidates(options.ort_library);
  try {
    r.runtime = load_runtime(options.ort_library);
    r.findings.push_back({"runtime", Verdict::ok,
                          "ONNX Runtime " + r.runtime->version + " from " + r.runtime->library_path + " (" + r.runtime->source + ")", {}});
    // The others, each once (a copy found by two routes is one copy), where they lie and how each was found.
    std::vector<std::string> others;
    std::set<std::string> seen = {r.runtime->library_path};
    for (const auto& c : r.runtime_candidates) {
      std::error_code ec;
      const std::string path = std::filesystem::weakly_canonical(c.path, ec).string();
      if (c.exists && seen.insert(path).second) others.push_back(path + " (" + c.source + ")");
    }
    if (!others.empty()) {
      std::string list;
      for (const auto& o : others) list += (list.empty() ? "" : "; ") + o;
      r.findings.push_back({"runtime-others", Verdict::info,
                            fmt::format("{} other ONNX Runtime {} found: {}; {} or ORTFLEET_ORT_LIB picks one", others.size(),
                                        others.size() == 1 ? "copy" : "copies", list, named(Setting::ort_library)),
                            {}});
    }
    const RuntimeTelemetry telemetry = runtime_telemetry();
    r.telemetry = telemetry;
    r.findings.push_back({"telemetry", telemetry.collects ? Verdict::warn : Verdict::ok, "ONNX Runtime's telemetry: " + telemetry.evidence,
                          telemetry.collects ? "Load ONNX Runtime only through ortfleet in this process, or set ORT_DISABLE_TELEMETRY=1 before it starts"
                                             : ""});
  } catch (const Error& e) {
    // A library the user named must work: that is an error, not a finding.
    if (!options.ort_library.empty()) throw;
    r.runtime_error = e.what();
    r.findings.push_back({"runtime", Verdict::fail, e.what_failed(), e.hint()});
  }
}

void check_gpus(DoctorReport& r) {
  r.driver = probe_cuda_driver();
  for (auto& f : gpu_findings(r.driver)) r.findings.push_back(std::move(f));
  if (r.driver.gpus.empty()) return;
  // Whether a warm pool's idle workers can give their GPU memory back (serving.md: parked workers).
  const auto& checkpoint = detail::ProcessCheckpoint::instance();
  if (checkpoint.available()) {
    r.findings.push_back({"parking", Verdict::ok,
                          "the driver's checkpoint API is there: an idle warm pool parks its GPU workers (no GPU memory held until the next job)", {}});
  } else {
    r.findings.push_back({"parking", Verdict::info, "an idle warm pool keeps its GPU memory: " + checkpoint.why_unavailable(),
                          "Parking needs NVIDIA's driver r570 or later; meanwhile a shorter --warm-pool-idle bounds what an idle pool holds"});
  }
}

void check_cuda_ep(DoctorReport& r, const DoctorOptions& options) {
  r.cuda_ep_candidates = cuda_ep_candidates();
  r.cuda_ep = find_cuda_ep();
  const bool have_gpu = !r.driver.gpus.empty();
  if (!r.cuda_ep) {
    r.findings.push_back({"cuda-ep", have_gpu ? Verdict::fail : Verdict::info,
                          "no CUDA execution provider library (libonnxruntime_providers_cuda.so) found",
                          "Run scripts/fetch-onnxruntime.sh --gpu, or set ORTFLEET_CUDA_EP to the library"});
    return;
  }
  const std::string ep = r.cuda_ep->path;
  // Libraries the EP links against, then those it loads on demand.
  try {
    for (const auto& name : detail::elf_needed_libraries(ep)) {
      if (name.rfind("libcu", 0) == 0 || name.rfind("libnv", 0) == 0) {
        r.libraries.push_back(check_library(name, "linked by the CUDA EP", true));
      }
    }
  } catch (const Error& e) {
    r.findings.push_back({"cuda-ep", Verdict::fail, e.what_failed(), e.hint()});
    return;
  }
  // ONNX Runtime's cuDNN loader tries libcudnn.so.9, then libcudnn.so.
  LibraryCheck cudnn = check_library("libcudnn.so.9", "loaded on demand by the CUDA EP (convolutions)", true);
  if (!cudnn.found) {
    LibraryCheck unversioned = check_library("libcudnn.so", "loaded on demand by the CUDA EP (convolutions)", true);
    if (unversioned.found) cudnn = unversioned;
  }
  r.libraries.push_back(cudnn);
  r.libraries.push_back(check_library("libcufft.so.12", "loaded on demand (FFT operators only)", false));
  r.libraries.push_back(check_library("libnvrtc.so.13", "loaded on demand (runtime-compiled kernels)", false));
  for (const auto& lib : r.libraries) {
    if (lib.found) {
      r.findings.push_back({"library:" + lib.name, Verdict::ok, lib.name + " " + lib.version + " at " + lib.path, {}});
      continue;
    }
    Verdict v = lib.required ? (have_gpu ? Verdict::fail : Verdict::info) : Verdict::warn;
    if (!lib.required && !have_gpu) v = Verdict::info;
    std::string fix = lib.name.rfind("libcudnn", 0) == 0
                          ? "Install cuDNN 9 for CUDA 13 (e.g. pip install nvidia-cudnn-cu13) and add its lib folder to LD_LIBRARY_PATH"
                      : lib.name == "libcuda.so.1" ? "Install the NVIDIA driver (it provides libcuda.so.1)"
                                                   : "Install the CUDA 13 runtime libraries and add their folder to LD_LIBRARY_PATH";
    r.findings.push_back({"library:" + lib.name, v, lib.name + " (" + lib.why + ") not found: " + lib.error, fix});
  }

  // GPU code in the EP: native machine code per GPU, or PTX the driver must JIT at start-up.
  try {
    const auto archs = detail::fatbin_architectures(ep);
    r.ep_cubin_architectures.assign(archs.cubin.begin(), archs.cubin.end());
    r.ep_ptx_architectures.assign(archs.ptx.begin(), archs.ptx.end());
    for (const auto& g : r.driver.gpus) {
      const int sm = g.compute_major * 10 + g.compute_minor;
      const auto support = detail::arch_support(archs, sm);
      const char* name = support == detail::ArchSupport::native ? "native" : support == detail::ArchSupport::ptx_jit ? "ptx-jit" : "none";
      r.architectures.push_back({g.ordinal, sm_name(sm), name});
      const std::string who = "cuda:" + std::to_string(g.ordinal) + " (" + sm_name(sm) + ")";
      if (support == detail::ArchSupport::native) {
        r.findings.push_back({"arch:cuda:" + std::to_string(g.ordinal), Verdict::ok, who + ": the CUDA EP carries native code", {}});
      } else if (support == detail::ArchSupport::ptx_jit) {
        r.findings.push_back({"arch:cuda:" + std::to_string(g.ordinal), Verdict::warn,
                              who + ": no native code in the CUDA EP, only PTX: the driver JIT-compiles every kernel at start-up (minutes)",
                              "Keep the JIT cache: export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=<persistent folder>; "
                              "better, use an ONNX Runtime build with " + sm_name(sm) + " code"});
      } else {
        r.findings.push_back({"arch:cuda:" + std::to_string(g.ordinal), Verdict::fail,
                              who + ": the CUDA EP has neither code nor PTX for this GPU (it carries " + join(r.ep_cubin_architectures) + ")",
                              "Use an ONNX Runtime CUDA build that supports " + sm_name(sm)});
      }
    }
    if (r.driver.gpus.empty()) {
      r.findings.push_back({"arch", Verdict::info,
                            "the CUDA EP carries native code for " + join(r.ep_cubin_architectures) + "; PTX for " +
                                join(r.ep_ptx_architectures),
                            {}});
    }
  } catch (const Error& e) {
    r.findings.push_back({"arch", Verdict::warn, "could not read the CUDA EP's GPU code: " + e.what_failed(), {}});
  }

  if (!have_gpu || !options.register_cuda_ep || !r.runtime) {
    r.findings.push_back({"cuda-ep", Verdict::info, "CUDA EP library at " + ep + " (" + r.cuda_ep->source + "); not loaded: no GPU", {}});
    return;
  }
  const CudaProviderState& state = prepare_cuda_provider();
  r.provider = state;
  if (!state.core_mismatch.empty()) {
    r.findings.push_back({"ort-core", Verdict::warn, state.core_mismatch,
                          "Use a CUDA-built core: scripts/fetch-onnxruntime.sh --gpu installs onnxruntime-node 1.29.0's; or " +
                              named(Setting::ort_library)});
  }
  if (state.path == "plugin") {
    r.findings.push_back({"cuda-ep", Verdict::ok,
                          "CUDA EP loaded and registered as a plugin in " + std::to_string(static_cast<int>(state.register_ms)) +
                              " ms; devices: " + std::to_string(state.plugin_devices.size()),
                          {}});
  } else if (!state.path.empty()) {
    r.findings.push_back({"cuda-ep", Verdict::warn, "the plugin path failed (" + state.plugin_error + "); sessions use the " + state.path + " path",
                          "Use ONNX Runtime >= 1.29 with the matching CUDA EP library"});
  } else {
    r.findings.push_back({"cuda-ep", Verdict::fail, "the CUDA EP cannot be used: " + state.plugin_error,
                          "Fix the libraries reported above; check LD_LIBRARY_PATH"});
  }
}

void check_environment(DoctorReport& r) {
  const char* names[] = {"CUDA_MODULE_LOADING", "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_CACHE_DISABLE",
                         "CUDA_CACHE_MAXSIZE", "CUDA_CACHE_PATH", "CUDA_DEVICE_MAX_CONNECTIONS", "CUDNN_LOGLEVEL_DBG",
                         "CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "LD_LIBRARY_PATH",
                         detail::env_name(detail::EnvVar::ort_lib), detail::env_name(detail::EnvVar::ort_root),
                         detail::env_name(detail::EnvVar::cuda_ep), detail::env_name(detail::EnvVar::cache)};
  for (const char* n : names) r.environment.push_back({n, detail::env_var(n)});
  auto value = [&](const char* n) { return detail::env_var(n).value_or(""); };
  if (value("CUDA_MODULE_LOADING") == "EAGER") {
    r.findings.push_back({"env:CUDA_MODULE_LOADING", Verdict::warn,
                          "CUDA_MODULE_LOADING=EAGER loads every kernel of the 230 MB CUDA EP at context creation (it doubled a single-GPU start in our measurements)",
                          "unset CUDA_MODULE_LOADING (LAZY is the default)"});
  }
  if (value("CUDA_LAUNCH_BLOCKING") == "1") {
    r.findings.push_back({"env:CUDA_LAUNCH_BLOCKING", Verdict::warn, "CUDA_LAUNCH_BLOCKING=1 makes every kernel launch synchronous",
                          "unset CUDA_LAUNCH_BLOCKING outside debugging"});
  }
  if (value("CUDA_CACHE_DISABLE") == "1") {
    r.findings.push_back({"env:CUDA_CACHE_DISABLE", Verdict::warn, "CUDA_CACHE_DISABLE=1: PTX is JIT-compiled again at every start",
                          "unset CUDA_CACHE_DISABLE"});
  }
  if (!value("CUDNN_LOGLEVEL_DBG").empty() && value("CUDNN_LOGLEVEL_DBG") != "0") {
    r.findings.push_back({"env:CUDNN_LOGLEVEL_DBG", Verdict::warn, "cuDNN API logging is on; it slows every cuDNN call",
                          "unset CUDNN_LOGLEVEL_DBG"});
  }
  if (auto v = detail::env_var("CUDA_VISIBLE_DEVICES")) {
    r.findings.push_back({"env:CUDA_VISIBLE_DEVICES", Verdict::info,
                          "CUDA_VISIBLE_DEVICES=" + *v + ": cuda:N below counts only these GPUs, in this order", {}});
  }
  if (value("OMP_WAIT_POLICY") == "ACTIVE") {
    r.findings.push_back({"env:OMP_WAIT_POLICY", Verdict::info, "OMP_WAIT_POLICY=ACTIVE: OpenMP threads of other libraries spin",
                          "prefer PASSIVE when several sessions share the CPU"});
  }
}

void check_machine(DoctorReport& r) {
  r.machine.logical_cpus = static_cast<int>(std::thread::hardware_concurrency());
  r.machine.memory_bytes = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  struct statvfs shm {};
  if (::statvfs("/dev/shm", &shm) == 0) r.machine.shm_bytes = static_cast<uint64_t>(shm.f_blocks) * shm.f_frsize;
  struct utsname u {};
  if (::uname(&u) == 0) r.machine.kernel = std::string(u.sysname) + " " + u.release;
  r.findings.push_back({"machine", Verdict::info,
                        std::to_string(r.machine.logical_cpus) + " logical CPUs, " + std::to_string(r.machine.memory_bytes >> 30) +
                            " GiB RAM, " + r.machine.kernel,
                        {}});
}

}  // namespace

std::vector<Finding> gpu_findings(const CudaDriverInfo& driver) {
  std::vector<Finding> out;
  if (!driver.loaded) {
    out.push_back({"gpu", Verdict::info, "no usable GPU: " + driver.error + "; sessions will run on the CPU",
                   "On a GPU machine: install the NVIDIA driver and check CUDA_VISIBLE_DEVICES"});
    return out;
  }
  if (driver.gpus.empty()) {
    out.push_back({"gpu", Verdict::info, "the NVIDIA driver is loaded but sees no GPU", "Check CUDA_VISIBLE_DEVICES"});
    return out;
  }
  std::string names;
  for (const auto& g : driver.gpus) names += (names.empty() ? "" : ", ") + ("cuda:" + std::to_string(g.ordinal) + " " + g.name);
  out.push_back({"gpu", Verdict::ok,
                 std::to_string(driver.gpus.size()) + " GPU(s): " + names + "; driver " +
                     (driver.driver_version.empty() ? std::to_string(driver.driver_api_version) : driver.driver_version) +
                     ", cuInit " + std::to_string(static_cast<int>(driver.init_ms)) + " ms",
                 {}});
  std::string not_persistent;
  for (const auto& g : driver.gpus) {
    if (g.mig_enabled.value_or(false)) {
      out.push_back({"gpu-mig", Verdict::warn, "cuda:" + std::to_string(g.ordinal) + " has MIG enabled: only MIG instances can run work",
                     "Address MIG instances through CUDA_VISIBLE_DEVICES=MIG-<uuid>"});
    }
    if (g.persistence_mode == false) not_persistent += (not_persistent.empty() ? "cuda:" : ", cuda:") + std::to_string(g.ordinal);
  }
  // cuInit is the step that serialises across GPUs (README: "Why the start-up of many GPUs is slow").
  // Without persistence mode, a GPU that no process holds is torn down and set up again by the next cuInit.
  if (!not_persistent.empty()) {
    out.push_back({"gpu-persistence", Verdict::warn,
                   "persistence mode is off on " + not_persistent +
                       ": when no process holds a GPU the driver tears its state down, and the next start sets it up again in cuInit",
                   "Turn it on: sudo nvidia-smi -pm 1, or run nvidia-persistenced"});
  } else if (std::all_of(driver.gpus.begin(), driver.gpus.end(), [](const GpuInfo& g) { return g.persistence_mode.has_value(); })) {
    out.push_back({"gpu-persistence", Verdict::ok, "persistence mode is on for every GPU", {}});
  }
  return out;
}

DoctorReport run_doctor(const DoctorOptions& options) {
  DoctorReport r;
  check_runtime(r, options);
  check_gpus(r);
  check_cuda_ep(r, options);
  check_environment(r);
  check_machine(r);
  if (!options.model.empty()) detail::check_model(r, options);
  return r;
}

std::string DoctorReport::to_json() const {
  json j;
  json candidates = json::array();
  for (const auto& c : runtime_candidates) candidates.push_back({{"path", c.path}, {"source", c.source}, {"exists", c.exists}});
  j["runtime"] = runtime ? json{{"loaded", true}, {"path", runtime->library_path}, {"source", runtime->source},
                                {"version", runtime->version}, {"build_info", runtime->build_info}, {"providers", runtime->providers}}
                         : json{{"loaded", false}, {"error", runtime_error}};
  j["runtime"]["candidates"] = candidates;
  if (telemetry) {
    j["runtime"]["telemetry"] = {{"uploader", telemetry->uploader}, {"collects", telemetry->collects}, {"evidence", telemetry->evidence}};
  }
  json gpus = json::array();
  for (const auto& g : driver.gpus) {
    gpus.push_back({{"ordinal", g.ordinal}, {"name", g.name}, {"uuid", g.uuid}, {"pci_bus_id", g.pci_bus_id},
                    {"memory_bytes", g.total_memory}, {"compute_capability", std::to_string(g.compute_major) + "." + std::to_string(g.compute_minor)},
                    {"architecture", g.architecture()}, {"multiprocessors", g.multiprocessors},
                    {"mig_enabled", g.mig_enabled ? json(*g.mig_enabled) : json(nullptr)},
                    {"persistence_mode", g.persistence_mode ? json(*g.persistence_mode) : json(nullptr)}});
  }
  j["driver"] = {{"loaded", driver.loaded}, {"library", driver.library_path}, {"error", driver.error},
                 {"cuda_version", driver.driver_api_version}, {"driver_version", driver.driver_version},
                 {"cuinit_ms", driver.init_ms}};
  j["gpus"] = gpus;
  json ep_candidates = json::array();
  for (const auto& c : cuda_ep_candidates) ep_candidates.push_back({{"path", c.path}, {"source", c.source}, {"exists", c.exists}});
  j["cuda_ep"] = {{"found", cuda_ep.has_value()}, {"path", cuda_ep ? cuda_ep->path : ""}, {"source", cuda_ep ? cuda_ep->source : ""},
                  {"candidates", ep_candidates}, {"native_architectures", ep_cubin_architectures},
                  {"ptx_architectures", ep_ptx_architectures}};
  if (provider) {
    j["cuda_ep"]["attach_path"] = provider->path;
    j["cuda_ep"]["plugin_error"] = provider->plugin_error;
    j["cuda_ep"]["plugin_devices"] = provider->plugin_devices;
    j["cuda_ep"]["register_ms"] = provider->register_ms;
  }
  json libs = json::array();
  for (const auto& l : libraries) {
    libs.push_back({{"name", l.name}, {"why", l.why}, {"required", l.required}, {"found", l.found}, {"path", l.path},
                    {"version", l.version}, {"error", l.error}});
  }
  j["libraries"] = libs;
  json archs = json::array();
  for (const auto& a : architectures) archs.push_back({{"gpu", a.gpu}, {"architecture", a.architecture}, {"support", a.support}});
  j["architectures"] = archs;
  json env = json::object();
  for (const auto& e : environment) env[e.name] = e.value ? json(*e.value) : json(nullptr);
  j["environment"] = env;
  j["machine"] = {{"logical_cpus", machine.logical_cpus}, {"memory_bytes", machine.memory_bytes},
                  {"shm_bytes", machine.shm_bytes}, {"kernel", machine.kernel}};
  json findings_json = json::array();
  for (const auto& f : findings) {
    findings_json.push_back({{"check", f.check}, {"verdict", to_string(f.verdict)}, {"summary", f.summary}, {"fix", f.fix}});
  }
  j["findings"] = findings_json;
  if (model) {
    j["model"] = {{"path", model->model},          {"device", model->device},   {"nodes", model->facts.nodes},
                  {"opset", model->facts.opset},    {"initializer_bytes", model->facts.initializer_bytes},
                  {"dynamic_dims", model->facts.dynamic_dims}, {"file_error", model->file_error}, {"started", model->started},
                  {"ready_ms", model->ready_ms},    {"crashed", model->crashed}, {"error", model->error}};
  }
  j["ok"] = !has_failures();
  return j.dump(2);
}

}  // namespace ortfleet
