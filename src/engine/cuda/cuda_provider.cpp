#include "ortfleet/engine/cuda_provider.hpp"

#include <dlfcn.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <unordered_map>

#include "base/elf_file.hpp"
#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "base/system_paths.hpp"
#include "engine/cuda/cuda_provider.hpp"
#include "engine/runtime/ort_environment.hpp"
#include "engine/runtime/ort_errors.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/runtime.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
constexpr const char* kEpFile = "libonnxruntime_providers_cuda.so";
constexpr const char* kRegistrationName = "ortfleet.cuda";
constexpr const char* kCudaEpName = "CUDAExecutionProvider";

void add_candidate(std::vector<CudaEpLocation>& out, fs::path p, const std::string& source) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) p /= kEpFile;
  out.push_back({p.string(), source, fs::exists(p, ec)});
}
}  // namespace

std::vector<CudaEpLocation> cuda_ep_candidates() {
  std::vector<CudaEpLocation> out;
  if (auto v = detail::env_value(detail::EnvVar::cuda_ep)) add_candidate(out, *v, detail::env_name(detail::EnvVar::cuda_ep));
  if (const RuntimeInfo* rt = loaded_runtime()) {
    add_candidate(out, fs::path(rt->library_path).parent_path(), "next to " + fs::path(rt->library_path).filename().string());
  }
  if (const auto fetched = detail::fetched_ort_dir(); !fetched.empty()) {
    add_candidate(out, fetched / "lib", "fetched by scripts/fetch-onnxruntime.sh");
  }
  for (const auto& site : detail::python_package_dirs()) {
    std::error_code ec;
    if (fs::exists(site / "onnxruntime" / "capi" / kEpFile, ec)) {
      add_candidate(out, site / "onnxruntime" / "capi", "Python package onnxruntime-gpu in " + site.string());
    }
  }
  return out;
}

namespace {
/// Why the CUDA EP library at `path` must not be loaded into this process ("" when it may): it is read
/// as the loader will read it first (a named pipe there held dlopen for ever, a damaged file kills the
/// process), and refused where another user could change it, as the runtime is.
std::string cuda_ep_unloadable(const std::string& path) {
  const std::string hint = "Run scripts/fetch-onnxruntime.sh --gpu, or set ORTFLEET_CUDA_EP to a libonnxruntime_providers_cuda.so";
  try {
    detail::check_loadable_library(path, {}, "the CUDA EP library", hint);
    detail::check_library_owners(path, "the CUDA EP library", hint);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}
}  // namespace

std::optional<CudaEpLocation> find_cuda_ep() {
  for (auto& c : cuda_ep_candidates()) {
    if (c.exists) return c;
  }
  return std::nullopt;
}

namespace {

struct ProviderRegistry {
  std::mutex mutex;
  CudaProviderState state;
  std::unordered_map<int, const OrtEpDevice*> ep_devices;  // owned by the environment
  bool builtin_available = false;
};

ProviderRegistry& registry() {
  static ProviderRegistry r;
  return r;
}

void prepare_locked(ProviderRegistry& r) {
  if (r.state.prepared) return;
  r.state.prepared = true;
  const RuntimeInfo& rt = load_runtime();
  for (const auto& p : rt.providers) r.builtin_available = r.builtin_available || p == kCudaEpName;

  auto ep = find_cuda_ep();
  const std::string unloadable = ep ? cuda_ep_unloadable(ep->path) : std::string();
  if (!ep) {
    r.state.plugin_error = "no " + std::string(kEpFile) + " found (set ORTFLEET_CUDA_EP, or run scripts/fetch-onnxruntime.sh --gpu)";
  } else if (!unloadable.empty()) {
    r.state.library = ep->path;
    r.state.plugin_error = unloadable;
    ep.reset();  // nor through ONNX Runtime's own (legacy) loading
  } else {
    r.state.library = ep->path;
    const auto start = std::chrono::steady_clock::now();
    try {
      Ort::Env& env = detail::ort_env();
      env.RegisterExecutionProviderLibrary(kRegistrationName, ep->path);
      for (const auto& device : env.GetEpDevices()) {
        if (std::string(device.EpName()) != kCudaEpName) continue;
        const char* id = device.EpOptions().GetValue("device_id");
        const int ordinal = id != nullptr ? std::atoi(id) : static_cast<int>(r.ep_devices.size());
        r.ep_devices[ordinal] = static_cast<const OrtEpDevice*>(device);
        r.state.plugin_devices.push_back(ordinal);
      }
      if (r.ep_devices.empty()) r.state.plugin_error = "the CUDA EP library registered but offers no GPU device";
    } catch (const Ort::Exception& e) {
      r.state.plugin_error = std::string("registering the CUDA EP library failed: ") + e.what();
    }
    r.state.register_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  if (!r.ep_devices.empty()) r.state.path = "plugin";
  else if (r.builtin_available) r.state.path = "builtin";
  else if (ep) r.state.path = "legacy";
  // ONNX Runtime 1.29's CUDA EP library is a provider-bridge one: its kernels call back into the
  // core for shared CPU code (Resize with sizes, Slice, If, Concat, ...), through a table a core
  // built without CUDA leaves mostly empty. On 1 x H100, 6 of 10 real models and a transformer died
  // of SIGSEGV there with com.github.asus4.onnxruntime's CPU-only core; with onnxruntime-node
  // 1.29.0's CUDA-built core and the same EP library, all of them ran (docs/troubleshooting.md).
  if (!r.state.path.empty() && !r.builtin_available) {
    r.state.core_mismatch = "ONNX Runtime's core library (" + rt.library_path + ") is built without CUDA, and the CUDA EP library " +
                            r.state.library + " " + detail::kCpuCoreUnderCudaEp;
    spdlog::warn("{}. Use a CUDA-built core: scripts/fetch-onnxruntime.sh --gpu installs onnxruntime-node 1.29.0's (or pass {})",
                 r.state.core_mismatch, named(Setting::ort_library));
  }
}

}  // namespace

const CudaProviderState& prepare_cuda_provider() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  prepare_locked(r);
  return r.state;
}

bool cuda_provider_prepared() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  return r.state.prepared;
}

bool preload_cuda_ep_library() {
  auto ep = find_cuda_ep();
  if (!ep || !cuda_ep_unloadable(ep->path).empty()) return false;
  // Kept loaded for the process: ONNX Runtime's own dlopen of the same file then finds it mapped and
  // relocated. This does not initialise CUDA, so it can run beside cuInit.
  return dlopen(ep->path.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr;
}

namespace detail {

ProviderAttachment attach_cuda(Ort::SessionOptions& options, int ordinal, const CudaOptions& cuda) {
  auto& r = registry();
  std::unique_lock lock(r.mutex);
  prepare_locked(r);
  const std::string where = "cuda:" + std::to_string(ordinal);
  ProviderAttachment out{r.state.path, r.state.library, {}};
  const auto keys = cuda.provider_options();

  if (r.state.path == "plugin") {
    auto it = r.ep_devices.find(ordinal);
    if (it == r.ep_devices.end()) {
      throw Error("the CUDA EP offers no device " + where, "'ortfleet doctor' lists the GPUs it sees", where);
    }
    std::unordered_map<std::string, std::string> map(keys.begin(), keys.end());
    lock.unlock();
    try {
      options.AppendExecutionProvider_V2(ort_env(), {Ort::ConstEpDevice(it->second)}, map);
    } catch (const Ort::Exception& e) {
      rethrow_ort_error(e, "attaching the CUDA EP (plugin path)", where);
    }
    return out;
  }
  if (!r.state.plugin_error.empty()) out.note = r.state.plugin_error;
  lock.unlock();

  if (out.path == "builtin") {
    try {
      Ort::CUDAProviderOptions v2;
      std::unordered_map<std::string, std::string> map(keys.begin(), keys.end());
      map["device_id"] = std::to_string(ordinal);
      v2.Update(map);
      options.AppendExecutionProvider_CUDA_V2(*v2);
      return out;
    } catch (const Ort::Exception& e) {
      out.note += (out.note.empty() ? "" : "; ") + std::string("built-in CUDA EP failed: ") + e.what();
    }
  }
  if (out.library.empty()) {
    throw Error("no CUDA execution provider: " + out.note,
                "Run scripts/fetch-onnxruntime.sh --gpu or set ORTFLEET_CUDA_EP to libonnxruntime_providers_cuda.so", where);
  }
  // The legacy struct carries no TF32, CUDA graph, NHWC or max-workspace fields: say which were dropped.
  OrtCUDAProviderOptions legacy;
  legacy.device_id = ordinal;
  legacy.cudnn_conv_algo_search = cuda.conv_algo_search == ConvAlgoSearch::exhaustive  ? OrtCudnnConvAlgoSearchExhaustive
                                  : cuda.conv_algo_search == ConvAlgoSearch::heuristic ? OrtCudnnConvAlgoSearchHeuristic
                                                                                       : OrtCudnnConvAlgoSearchDefault;
  legacy.gpu_mem_limit = cuda.gpu_mem_limit ? static_cast<size_t>(*cuda.gpu_mem_limit) : SIZE_MAX;
  legacy.arena_extend_strategy = cuda.arena_extend == ArenaExtendStrategy::next_power_of_two ? 0 : 1;
  legacy.do_copy_in_default_stream = cuda.copy_in_default_stream ? 1 : 0;
  legacy.has_user_compute_stream = cuda.user_compute_stream != 0 ? 1 : 0;
  legacy.user_compute_stream = reinterpret_cast<void*>(cuda.user_compute_stream);
  const CudaOptions defaults;
  std::string ignored;
  if (cuda.cuda_graph != defaults.cuda_graph) ignored += " enable_cuda_graph";
  if (cuda.tf32 != defaults.tf32) ignored += " use_tf32";
  if (cuda.prefer_nhwc != defaults.prefer_nhwc) ignored += " prefer_nhwc";
  if (cuda.conv_use_max_workspace != defaults.conv_use_max_workspace) ignored += " cudnn_conv_use_max_workspace";
  if (!cuda.extra.empty()) ignored += " (extra keys)";
  if (!ignored.empty()) out.note += (out.note.empty() ? "" : "; ") + std::string("legacy path ignores:") + ignored;
  out.path = "legacy";
  try {
    options.AppendExecutionProvider_CUDA(legacy);
  } catch (const Ort::Exception& e) {
    rethrow_ort_error(e, "attaching the CUDA EP (legacy path)", where);
  }
  return out;
}

}  // namespace detail
}  // namespace ortfleet
