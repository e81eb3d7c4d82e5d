#include "fleet/local/local_start.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <thread>

#include "base/private_dir.hpp"
#include "base/slurm.hpp"
#include "engine/cache/cache_use.hpp"
#include "engine/cache/model_digest.hpp"
#include "engine/files/mapped_file.hpp"
#include "engine/providers/provider_registry.hpp"
#include "engine/runtime/ort_environment.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cache.hpp"
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
    if (lookup_needs_content(plan.model_path, layout, cache.dir(), config)) model_content(plan.model_path, cache.dir());
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
  const bool off_the_host = device_has(device, Capability::device_memory);
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
  provider_for(device).tune_for_fleet(tuned);  // the device's own settings (CUDA: one hardware queue per context)
  return tuned;
}

namespace {

/// Each device's config as the overlapped start tunes it (tuned_for_fleet): decided once per start, for
/// the cache key's prefetch, the providers' environment and each device's session.
std::vector<RunConfig> tuned_configs(const LocalStartPlan& plan) {
  std::vector<RunConfig> tuned;
  for (const auto& d : plan.devices) tuned.push_back(tuned_for_fleet(plan.config, d, plan.fleet_size));
  return tuned;
}

/// What the overlapped start prepares beside the runtime's load (ExecutionProvider::prepares_ahead): each
/// provider of the plan's stacks that does, once, and the devices whose own provider does (its driver
/// started, each device opened for the process). CUDA: its EP library, cuInit and every GPU's context.
struct AheadOfTheRuntime {
  std::vector<const ExecutionProvider*> providers;  // in the order of the plan's devices and their stacks
  std::vector<size_t> first_device;                 // for each of them, the plan's first device it serves
  std::vector<const DeviceProvider*> drivers;
  std::vector<size_t> devices;                      // the plan's devices to open, by index
};

AheadOfTheRuntime ahead_of_the_runtime(const LocalStartPlan& plan, const std::vector<RunConfig>& tuned) {
  AheadOfTheRuntime ahead;
  for (size_t i = 0; i < plan.devices.size(); ++i) {
    const ProviderStack stack = provider_stack(plan.devices[i], tuned[i]);
    for (const ExecutionProvider* p : stack.providers()) {
      if (!p->prepares_ahead() || std::find(ahead.providers.begin(), ahead.providers.end(), p) != ahead.providers.end()) continue;
      ahead.providers.push_back(p);
      ahead.first_device.push_back(i);
    }
    const DeviceProvider& own = stack.device_provider();
    if (!own.prepares_ahead()) continue;  // its first session prepares it (Session::Impl::create), in order
    if (std::find(ahead.drivers.begin(), ahead.drivers.end(), &own) == ahead.drivers.end()) ahead.drivers.push_back(&own);
    ahead.devices.push_back(i);
  }
  return ahead;
}

PreparedRuntime prepare_runtime_tuned(const LocalStartPlan& plan, const std::vector<RunConfig>& tuned, Timeline& timeline) {
  PreparedRuntime out;
  out.device_errors.resize(plan.devices.size());
  AheadOfTheRuntime ahead;
  try {
    ahead = ahead_of_the_runtime(plan, tuned);
  } catch (const std::exception& e) {  // a provider the config stacks that this build lacks, or its options
    out.error = Error::from(e);
    return out;
  }
  std::thread load_libraries;
  std::thread start_drivers;
  if (!ahead.providers.empty()) {
    // Before any driver starts (cuInit, on the next thread): what each provider reads once per process,
    // as the config of the first device it serves asks.
    for (size_t k = 0; k < ahead.providers.size(); ++k) ahead.providers[k]->apply_environment(tuned[ahead.first_device[k]]);
    load_libraries = std::thread([&] {
      auto p = timeline.scope(phase::ep_library_load, kProcessLane);
      bool loaded = true;
      for (const ExecutionProvider* provider : ahead.providers) loaded = provider->preload() && loaded;
      if (!loaded) p.arg("loaded", "false");
    });
  }
  if (!ahead.drivers.empty()) {
    // The drivers (cuInit), then every device opened in parallel (the contexts of different GPUs do not
    // wait for each other inside the driver).
    start_drivers = std::thread([&] {
      {
        auto p = timeline.scope(phase::cuda_init, kProcessLane);
        for (const DeviceProvider* driver : ahead.drivers) driver->start_driver();
      }
      std::vector<std::thread> per_device;
      for (const size_t i : ahead.devices) {
        per_device.emplace_back([&, i] {
          try {
            auto p = timeline.scope(phase::cuda_context, plan.devices[i].to_string());
            // Made for this process: its sessions, later ones too (a worker's), find it made.
            provider_for(plan.devices[i]).open_device_for_process(plan.devices[i]);
          } catch (const std::exception& e) {
            out.device_errors[i] = Error::from(e);
          }
        });
      }
      for (auto& t : per_device) t.join();
    });
  }
  try {
    auto p = timeline.scope(phase::runtime_load, kProcessLane);
    load_runtime(plan.ort_library);
    ort_env();
  } catch (const std::exception& e) {
    out.error = Error::from(e);
  }
  if (load_libraries.joinable()) load_libraries.join();
  if (!ahead.providers.empty() && !out.error) {
    try {
      // Registration finds the libraries loaded; a driver may still be starting, in which case the
      // provider's device query waits for it inside the driver.
      auto p = timeline.scope(phase::ep_register, kProcessLane);
      p.arg("path", prepare_providers(ahead.providers));
    } catch (const std::exception& e) {
      out.error = Error::from(e);
    }
  }
  if (start_drivers.joinable()) start_drivers.join();
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
