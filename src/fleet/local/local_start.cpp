#include "fleet/local/local_start.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <optional>
#include <thread>

#include "base/private_dir.hpp"
#include "base/slurm.hpp"
#include "engine/cache/cache_use.hpp"
#include "engine/cache/model_digest.hpp"
#include "engine/cuda/cuda_driver.hpp"
#include "engine/cuda/cuda_environment.hpp"
#include "engine/files/mapped_file.hpp"
#include "engine/providers/provider_registry.hpp"
#include "engine/runtime/ort_environment.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/cuda_provider.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/model_file.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

namespace {

constexpr const char* kProcessLane = "process";

std::string profile_prefix(const LocalStartPlan& plan, const Device& device) {
  if (plan.profile_dir.empty()) return {};
  fs::create_directories(plan.profile_dir);
  std::string name = device.to_string();
  std::replace(name.begin(), name.end(), ':', '-');
  return (fs::path(plan.profile_dir) / ("ort-profile-" + name)).string();
}

/// Creates and warms up one device's session; never throws (the error lands in `result`).
void bring_up(const LocalStartPlan& plan, const RunConfig& config, const void* model_data, size_t model_size,
              Timeline& timeline, LocalDeviceResult& result) {
  try {
    SessionSpec spec = session_spec(plan, result.device, config);
    spec.model_data = model_data;
    spec.model_size = model_size;
    spec.profile_prefix = profile_prefix(plan, result.device);
    result.session = std::make_unique<Session>(spec, &timeline);
    result.session->warm_up(plan.warmup_runs);
    result.profile_path = result.session->end_profiling();
    result.ready_ns = monotonic_ns();
    result.memory_bytes = detail::memory_in_use(result.device);
    timeline.add({phase::ready, result.device.to_string(), result.ready_ns, result.ready_ns, 0, {}});
  } catch (const std::exception& e) {
    result.session.reset();
    result.error = Error::from(e);
  }
}

/// The model cache's lookup needs the model's layout, and where an entry of that layout exists, its
/// content hash: taken while ONNX Runtime and the CUDA EP load, it is remembered by the time the session
/// looks the entry up. A model the cache has no entry of its layout for is never read here.
void prefetch_cache_key(const LocalStartPlan& plan, const RunConfig& config, const Device& device) {
  if (!config.session.optimized_model_cache.value_or(false) || config.session.assigns_nodes()) return;
  try {
    const ModelCache cache(plan.cache_dir);
    ensure_private_dir(cache.dir(), kCacheFolderHint);
    resolve_model_cache_format(plan.model_path, config.session.model_cache_format);  // reads the graph once, remembered
    if (remembered_content(plan.model_path, cache.dir())) return;
    const std::string layout = layout_key(plan.model_path, model_layout(plan.model_path), device, config);
    const auto shared = ModelCache::shared_root(config);
    if (any_entry_of_layout(cache.dir(), layout, plan.model_path, false) ||
        (shared && any_entry_of_layout((fs::path(*shared) / "models").string(), layout, plan.model_path, true))) {
      model_content(plan.model_path, cache.dir());
    }
  } catch (const std::exception& e) {
    spdlog::debug("the model cache's key was not prepared ahead ({}); the session's lookup takes it", e.what());
  }
}

}  // namespace

SessionSpec session_spec(const LocalStartPlan& plan, const Device& device, const RunConfig& config) {
  SessionSpec spec;
  spec.model_path = plan.model_path;
  spec.device = device;
  spec.config = config;
  spec.cache_dir = plan.cache_dir;
  spec.dynamic_dim = plan.dynamic_dim;
  return spec;
}

void note_tier(DeviceStatus& s, const SessionTier& tier) {
  s.tier = tier.stage == SessionTier::Stage::none ? std::string() : to_string(tier.stage);
  s.tier_full_ms = tier.full_ms;
  s.tier_note = tier.note;
}

DeviceStatus ready_status(const LocalDeviceResult& r) {
  DeviceStatus s;
  s.device = r.device;
  s.state = DeviceState::ready;
  s.ready_ns = r.ready_ns;
  s.provider = r.session->provider().path;
  s.provider_note = r.session->provider().note;
  s.profile_path = r.profile_path;
  s.memory_bytes = r.memory_bytes;
  s.model_cache = r.session->model_cache_outcome();
  s.model_cache_note = r.session->model_cache_note();
  note_tier(s, r.session->tier());
  s.pid = static_cast<int>(::getpid());
  return s;
}

RunConfig tuned_for_fleet(const RunConfig& config, const Device& device, int fleet_size) {
  RunConfig tuned = config;
  const RunConfig defaults;
  const int share = std::max(1, usable_cpus() / std::max(1, fleet_size));
  // A session on a device with memory of its own (a GPU) computes there; its host threads mostly wait.
  const bool off_the_host = provider_for(device).memory() != nullptr;
  if (config.session.intra_op_threads == defaults.session.intra_op_threads) {
    tuned.session.intra_op_threads = off_the_host ? std::min(4, share) : share;
  }
  if (off_the_host && config.session.thread_spinning == defaults.session.thread_spinning) {
    tuned.session.thread_spinning = false;
  }
  // The pre-optimised model: its first start fills the cache, every later one skips graph
  // optimisation and maps the weights instead of parsing them. Where the cache has no home (no
  // ORTFLEET_CACHE, XDG_CACHE_HOME or HOME, as for some services) a start that did not ask for it
  // runs without it rather than fail.
  if (!config.session.optimized_model_cache) tuned.session.optimized_model_cache = ModelCache::find_default_root().has_value();
  if (device.is_gpu() && config.session.cuda_max_connections == 0 && std::getenv("CUDA_DEVICE_MAX_CONNECTIONS") == nullptr) {
    tuned.session.cuda_max_connections = 1;
  }
  return tuned;
}

namespace {

/// Each device's config as the overlapped start tunes it (tuned_for_fleet): decided once per start, for
/// the cache key's prefetch, the CUDA environment and each device's session.
std::vector<RunConfig> tuned_configs(const LocalStartPlan& plan) {
  std::vector<RunConfig> tuned;
  for (const auto& d : plan.devices) tuned.push_back(tuned_for_fleet(plan.config, d, plan.fleet_size));
  return tuned;
}

PreparedRuntime prepare_runtime_tuned(const LocalStartPlan& plan, const std::vector<RunConfig>& tuned, Timeline& timeline) {
  PreparedRuntime out;
  out.device_errors.resize(plan.devices.size());
  // CUDA's start overlapped: its EP library, cuInit and each GPU's context beside the runtime's load.
  // Another provider is prepared by its first session (Session::Impl::create), in order.
  const bool any_gpu = std::any_of(plan.devices.begin(), plan.devices.end(), [](const Device& d) { return d.is_gpu(); });
  std::thread load_ep_library;
  std::thread init_cuda;
  if (any_gpu) {
    // Before cuInit, which the next threads start: the fleet's CUDA settings for this process.
    const auto gpu = std::find_if(plan.devices.begin(), plan.devices.end(), [](const Device& d) { return d.is_gpu(); });
    apply_cuda_environment(tuned[static_cast<size_t>(gpu - plan.devices.begin())]);
    load_ep_library = std::thread([&] {
      auto p = timeline.scope(phase::ep_library_load, kProcessLane);
      if (!preload_cuda_ep_library()) p.arg("loaded", "false");
    });
    // cuInit, then every GPU's primary context in parallel (contexts of different GPUs do not wait
    // for each other inside the driver).
    init_cuda = std::thread([&] {
      {
        auto p = timeline.scope(phase::cuda_init, kProcessLane);
        CudaDriver::instance();
      }
      std::vector<std::thread> per_gpu;
      for (size_t i = 0; i < plan.devices.size(); ++i) {
        if (!plan.devices[i].is_gpu()) continue;
        per_gpu.emplace_back([&, i] {
          try {
            auto p = timeline.scope(phase::cuda_context, plan.devices[i].to_string());
            // Made for this process: its sessions, later ones too (a worker's), find it made.
            CudaDriver::PrimaryContext(cuda_ordinal(plan.devices[i])).keep_for_process();
          } catch (const std::exception& e) {
            out.device_errors[i] = Error::from(e);
          }
        });
      }
      for (auto& t : per_gpu) t.join();
    });
  }
  try {
    auto p = timeline.scope(phase::runtime_load, kProcessLane);
    load_runtime(plan.ort_library);
    ort_env();
  } catch (const std::exception& e) {
    out.error = Error::from(e);
  }
  if (load_ep_library.joinable()) load_ep_library.join();
  if (any_gpu && !out.error) {
    try {
      // Registration finds the library loaded; cuInit may still be running, in which case the EP's
      // device query waits for it inside the driver.
      auto p = timeline.scope(phase::ep_register, kProcessLane);
      p.arg("path", prepare_cuda_provider().path);
    } catch (const std::exception& e) {
      out.error = Error::from(e);
    }
  }
  if (init_cuda.joinable()) init_cuda.join();
  return out;
}

}  // namespace

PreparedRuntime prepare_runtime(const LocalStartPlan& plan, Timeline& timeline) { return prepare_runtime_tuned(plan, tuned_configs(plan), timeline); }

void start_locally(const LocalStartPlan& plan, Timeline& timeline, std::vector<LocalDeviceResult>& results,
                   const std::function<void(size_t)>& on_done) {
  results.clear();
  for (const auto& d : plan.devices) {
    LocalDeviceResult r;
    r.device = d;
    results.push_back(std::move(r));
  }

  auto fail_all = [&](const Error& error) {
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i].session == nullptr && !results[i].error) {
        results[i].error = error;
        on_done(i);
      }
    }
  };

  if (plan.mode != LocalMode::overlapped) {
    try {
      auto p = timeline.scope(phase::runtime_load, kProcessLane);
      load_runtime(plan.ort_library);
      ort_env();
    } catch (const std::exception& e) {
      fail_all(Error::from(e));
      return;
    }
    if (plan.mode == LocalMode::sequential) {
      for (size_t i = 0; i < results.size(); ++i) {
        bring_up(plan, plan.config, nullptr, 0, timeline, results[i]);
        on_done(i);
      }
      return;
    }
    std::vector<std::thread> threads;
    for (size_t i = 0; i < results.size(); ++i) {
      threads.emplace_back([&, i] {
        bring_up(plan, plan.config, nullptr, 0, timeline, results[i]);
        on_done(i);
      });
    }
    for (auto& t : threads) t.join();
    return;
  }

  // Overlapped: everything that does not depend on anything else starts at once.
  const std::vector<RunConfig> tuned = tuned_configs(plan);
  std::unique_ptr<MappedFile> model;
  std::optional<Error> model_error;
  std::thread read_model([&] {
    try {
      validate_model_file(plan.model_path);
      auto p = timeline.scope(phase::model_read, kProcessLane);
      model = std::make_unique<MappedFile>(plan.model_path, /*populate=*/true);
      p.arg("bytes", std::to_string(model->size()));
    } catch (const std::exception& e) {
      model_error = Error::from(e);
      return;
    }
    prefetch_cache_key(plan, tuned.front(), plan.devices.front());
  });
  const PreparedRuntime prepared = prepare_runtime_tuned(plan, tuned, timeline);
  read_model.join();
  if (prepared.error || model_error) {
    fail_all(prepared.error ? *prepared.error : *model_error);
    return;
  }

  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      if (prepared.device_errors[i]) {
        results[i].error = prepared.device_errors[i];
        on_done(i);
        return;
      }
      bring_up(plan, tuned[i], model->data(), model->size(), timeline, results[i]);
      on_done(i);
    });
  }
  for (auto& t : threads) t.join();
  // The sessions hold their own copies of everything they need from the model bytes.
  model.reset();
}

}  // namespace ortfleet::detail
