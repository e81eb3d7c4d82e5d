// A warm node's parts of the pool's executor (issue 60): a restore ahead of a job, sessions unloaded
// before parking and made again from their cache entry, sessions a job handed over made again from the
// entry at idle, and what the workers hold, for the daemon's memory (pool_executor.hpp).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/cache/cache_use.hpp"
#include "engine/cuda/nvml.hpp"
#include "fleet/pool/pool_executor.hpp"
#include "fleet/pool/pool_paths.hpp"
#include "fleet/pool/served_models.hpp"
#include "fleet/pool/worker_parking.hpp"
#include "fleet/worker/wire.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/units.hpp"
#include "ortfleet/engine/cache.hpp"
#include "process/process_memory.hpp"

namespace ortfleet {
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
/// The plans of `said`'s sessions (a worker's status with plans) nobody holds, read from `folder`.
struct IdleSession {
  detail::LocalStartPlan plan;
  std::string key;
  std::string model_cache;  ///< "hit": made from its cache entry
};
std::vector<IdleSession> idle_sessions(const json& said, const std::string& folder) {
  std::vector<IdleSession> out;
  for (const auto& s : said.value("sessions", json::array())) {
    if (s.value("holders", 0) > 0 || !s.contains("plan")) continue;
    try {
      out.push_back({detail::with_absolute_paths(detail::plan_from_json(s.at("plan")), folder), s.value("session", ""), s.value("model_cache", "")});
    } catch (const std::exception& e) {
      spdlog::debug("a session's plan is not read: {}", e.what());
    }
  }
  return out;
}

/// The bytes of an entry of the model cache made from what `plan`'s model file holds now, for a device
/// of `device`'s kind, in this user's cache or the shared layer; nothing where there is none. Read from
/// the entries' manifests (their key, which begins with the content they were made from, and their
/// files): the daemon loads no runtime to compute a key.
std::optional<uint64_t> entry_of_model(const detail::LocalStartPlan& plan, const Device& device) {
  const auto now = detail::model_now(plan.model_path);
  if (!now) return std::nullopt;
  std::vector<fs::path> folders;
  try {
    folders.push_back(ModelCache(plan.cache_dir).dir());
  } catch (const std::exception&) {
    // no cache of this user's
  }
  if (const auto shared = ModelCache::shared_root(plan.config)) folders.push_back(fs::path(*shared) / "models");
  const std::string kind = std::string("|device=") + (device.is_gpu() ? "cuda" : "cpu");
  for (const auto& folder : folders) {
    for (const auto& path : detail::entry_manifests(folder)) {
      try {
        std::ifstream in(path);
        const json manifest = json::parse(in);
        const std::string key = manifest.value("key", "");
        // Its key begins with the content it was made from (wherever that file was), then names the device's kind.
        if (key.rfind(now->content + "|", 0) != 0 || key.find(kind) == std::string::npos) continue;
        // Priced as loading no faster than the model: starts do not use it.
        if (const auto gain = manifest.find("gain"); gain != manifest.end() && gain->is_object() && !gain->value("pays", true)) continue;
        uint64_t bytes = 0;
        for (const auto& f : manifest.value("files", json::array())) bytes += f.is_object() ? f.value("bytes", uint64_t{0}) : 0;
        return bytes;
      } catch (const std::exception&) {
        // another entry's, unreadable: not this one
      }
    }
  }
  return std::nullopt;
}
}  // namespace

// --- unloaded before parking, made again ahead of its job --------------------------------------------------

json WorkerPool::Impl::unload_before_parking(Member& m, json said) {
  if (options.unload_above_bytes == 0) return said;
  std::map<pool::ModelKey, std::vector<json>> dropping;
  for (const auto& s : idle_sessions(said, m.folder)) {
    // Only a session made from its entry (its weights come back from there) and large enough that the
    // upload beats the driver's restore of them.
    if (s.model_cache != "hit") continue;
    const auto now = detail::model_now(s.plan.model_path);
    if (!now || now->bytes <= options.unload_above_bytes) continue;
    dropping[model_key(s.plan.model_path)].push_back(detail::plan_to_json(s.plan));
  }
  if (dropping.empty()) return said;
  std::vector<pool::ModelKey> dropped;
  for (const auto& [key, plans] : dropping) {
    try {
      m.process->channel().call(detail::message::evict, {{"model", key.path}}, kWorkerRequestTimeoutS);
      dropped.push_back(key);
    } catch (const std::exception& e) {
      spdlog::debug("{}: the worker pid {} did not drop {} before parking: {}", m.device.to_string(), m.pid, key.path, e.what());
    }
  }
  // What it holds now (a session a job attached to meanwhile stays, and so does its model).
  json now;
  try {
    now = ask_status(m, /*with_plans=*/true, kWorkerRequestTimeoutS);
  } catch (const std::exception&) {
    now = said;
  }
  std::set<std::string> still;
  for (const auto& s : now.value("sessions", json::array())) still.insert(s.value("model", ""));
  std::erase_if(dropped, [&](const pool::ModelKey& k) { return still.count(k.path) != 0; });
  std::lock_guard lock(mutex);
  for (const auto& key : dropped) {
    auto& plans = m.unloaded_plans[key];
    plans.insert(plans.end(), dropping[key].begin(), dropping[key].end());
    spdlog::info("{}: {} dropped before the worker pid {} parks (made again from its cache entry when a job comes)", m.device.to_string(), key.path, m.pid);
  }
  core.unloaded_for_parking(m.id, dropped);
  return now;
}

bool WorkerPool::Impl::remake_unloaded(Member& m, const pool::ModelKey& model) {
  std::vector<json> plans;
  {
    std::lock_guard lock(mutex);
    const auto it = m.unloaded_plans.find(model);
    if (it != m.unloaded_plans.end()) plans = std::move(it->second);
    m.unloaded_plans.erase(model);
  }
  bool made = !plans.empty();
  const int64_t start = monotonic_ns();
  for (const auto& plan : plans) {
    try {
      make_resident(m, detail::plan_from_json(plan));
    } catch (const std::exception& e) {
      made = false;
      spdlog::warn("{}: {} was not made again ahead of its job ({}); its start makes it", m.device.to_string(), model.path, Error::from(e).what());
    }
  }
  if (made) spdlog::info("{}: made {} again from its cache entry ahead of its job in {:.0f} ms", m.device.to_string(), model.path, static_cast<double>(monotonic_ns() - start) / 1e6);
  return made;
}

void WorkerPool::restore_ahead(const std::vector<Device>& devices, const std::string& model) {
  auto& s = *impl_;
  const std::optional<pool::ModelKey> key = model.empty() ? std::nullopt : std::optional<pool::ModelKey>(Impl::model_key(model));
  struct Held {
    Impl::MemberPtr member;
    bool remake = false;
  };
  std::vector<Held> held;
  std::unique_lock lock(s.mutex);
  if (s.core.is_stopping()) return;
  for (const Device& d : devices) {
    const auto at = std::find(s.options.devices.begin(), s.options.devices.end(), d);
    if (at == s.options.devices.end()) continue;  // not ours: the job's start says so
    const pool::RestoreAhead ahead = s.core.restore_ahead(static_cast<pool::DeviceIndex>(at - s.options.devices.begin()), key);
    for (pool::WorkerId id : ahead.held) {
      if (const auto m = s.member(id); m && m->process) held.push_back({m, ahead.remake_on == id});
      else s.core.release(id);
    }
  }
  if (!held.empty()) spdlog::info("a job's client comes: restoring {} worker(s) ahead of its request", held.size());
  // Each restored on a thread of its own, then the spares made again (after the restores: a new
  // worker's start would contend with them in the driver).
  s.in_background([this, held, key] {
    Impl& pool = *impl_;
    std::vector<std::thread> restores;
    for (const auto& h : held) {
      restores.emplace_back([&pool, h, key] {
        bool made = false;
        try {
          pool.restore_if_needed(h.member);
          if (h.remake) made = pool.remake_unloaded(*h.member, *key);
        } catch (const std::exception& e) {
          spdlog::debug("{}: not restored ahead: {}", h.member->device.to_string(), e.what());  // ended and replaced: its job starts anew
        }
        std::lock_guard released(pool.mutex);
        if (h.remake) pool.core.remade(h.member->id, *key, made);
        pool.core.release(h.member->id);
        pool.changed.notify_all();
      });
    }
    for (auto& t : restores) t.join();
    keep_up();
  });
}

size_t WorkerPool::remake_from_cache_entries() {
  auto& s = *impl_;
  std::vector<Impl::MemberPtr> idle;
  {
    std::lock_guard lock(s.mutex);
    for (const auto& [id, m] : s.members) {
      const pool::Worker* w = s.core.find(id);
      if (w == nullptr || w->phase != pool::Phase::ready || w->claims > 0 || w->models.empty() || !m->process) continue;
      if (detail::entry_holds_less(m->device) && s.core.hold(id)) idle.push_back(m);  // where that holds less only
    }
  }
  size_t remade = 0;
  for (const auto& m : idle) {
    try {
      for (const auto& session : idle_sessions(s.ask_status(*m, /*with_plans=*/true, kWorkerRequestTimeoutS), m->folder)) {
        // Made from the model (its start missed the cache) while an entry of it is there now: a session
        // from the entry holds less (none of the optimisation's leftovers). Tried once per session.
        if (session.model_cache != "miss") continue;
        {
          std::lock_guard lock(s.mutex);
          if (!m->remade_sessions.insert(session.key).second) continue;
        }
        if (!entry_of_model(session.plan, m->device)) continue;
        const auto before = detail::process_memory(m->pid);
        m->process->channel().call(detail::message::evict, {{"model", session.plan.model_path}}, kWorkerRequestTimeoutS);
        s.make_resident(*m, session.plan);
        const auto after = detail::process_memory(m->pid);
        ++remade;
        spdlog::info("{}: {} made again from its cache entry in the worker pid {} (host memory {} -> {})", m->device.to_string(),
                     session.plan.model_path, m->pid, bytes_text(before.pss_bytes), bytes_text(after.pss_bytes));
      }
    } catch (const std::exception& e) {
      spdlog::debug("{}: the worker pid {} made nothing again from the cache: {}", m->device.to_string(), m->pid, e.what());
    }
    std::lock_guard lock(s.mutex);
    s.core.release(m->id);
  }
  return remade;
}

std::vector<WorkerPool::ResidentPlan> WorkerPool::resident_plans() const {
  auto& s = *impl_;
  std::vector<Impl::MemberPtr> up;
  {
    std::lock_guard lock(s.mutex);
    for (const auto& [id, m] : s.members) {
      const pool::Worker* w = s.core.find(id);
      // Not a parked one, nor one awaiting its restore: it could not answer without its device.
      if (w != nullptr && (w->phase == pool::Phase::ready || w->phase == pool::Phase::claimed) && !w->restore_pending && m->process) up.push_back(m);
    }
  }
  std::vector<ResidentPlan> out;
  for (const auto& m : up) {
    try {
      const json said = s.ask_status(*m, /*with_plans=*/true, 10);
      for (const auto& session : said.value("sessions", json::array())) {
        if (!session.contains("plan")) continue;
        const detail::LocalStartPlan plan = detail::with_absolute_paths(detail::plan_from_json(session.at("plan")), m->folder);
        out.push_back({m->device, detail::plan_to_json(plan).dump(), session.value("idle_s", 0.0)});
      }
    } catch (const std::exception& e) {
      spdlog::debug("{}: the worker pid {} did not list its sessions: {}", m->device.to_string(), m->pid, e.what());
    }
  }
  return out;
}

}  // namespace ortfleet
