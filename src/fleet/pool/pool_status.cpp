// WorkerPool::status_json: every worker as the pool's core and the worker itself see it, answered within
// a second whatever the workers do (ortfleet/fleet/worker_pool.hpp).
#include <fmt/format.h>

#include <map>
#include <set>

#include "engine/cuda/nvml.hpp"
#include "fleet/pool/pool_executor.hpp"
#include "fleet/pool/pool_paths.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "process/process_memory.hpp"

namespace ortfleet {
using nlohmann::json;

namespace {
/// How long `status_json` waits for the workers' own answers: a worker that is busy, stopped or
/// overloaded is shown as it last answered, so that `pool status` answers within a second.
constexpr double kStatusWaitS = 0.8;
/// How long one worker may take to answer a status request on its own channel before that channel is
/// given up (the worker is left alone; the next status attaches a new channel).
constexpr double kStatusTimeoutS = 10;

/// "config.shapes.buckets.x.1" for the JSON pointer "/config/shapes/buckets/x.1".
std::string setting_name(const std::string& pointer) {
  std::string name = pointer.empty() ? pointer : pointer.substr(1);
  for (auto& c : name) c = c == '/' ? '.' : c;
  return name;
}

/// Sessions of one model that look the same in a table differ in their plans (shapes, buckets, threads,
/// ...): each gets "differs_by", the settings in which its plan differs from the others' of that model,
/// with its values. The plans themselves are not shown.
void tell_apart(json& sessions) {
  std::map<std::string, std::vector<json*>> by_model;
  for (auto& s : sessions) by_model[s.value("model", "")].push_back(&s);
  for (auto& [model, group] : by_model) {
    std::vector<json> flat;
    for (json* s : group) flat.push_back(s->contains("plan") ? s->at("plan").flatten() : json::object());
    std::set<std::string> differing;
    for (const auto& f : flat) {
      for (auto it = f.begin(); it != f.end(); ++it) {
        if (it.key() == "/model" || it.key() == "/profile_dir") continue;  // the path is the row's name already
        for (const auto& other : flat) {
          if (!other.contains(it.key()) || other.at(it.key()) != it.value()) differing.insert(it.key());
        }
      }
    }
    for (size_t i = 0; i < group.size(); ++i) {
      json differs = json::object();
      for (const auto& key : differing) differs[setting_name(key)] = flat[i].contains(key) ? flat[i].at(key) : json(nullptr);
      if (group.size() > 1) (*group[i])["differs_by"] = std::move(differs);
      group[i]->erase("plan");
    }
  }
}
/// The models a worker dropped before it parked (made again when a job comes).
json unloaded_models(const pool::Worker& w) {
  json out = json::array();
  for (const auto& m : w.unloaded) out.push_back(m.path);
  return out;
}
}  // namespace

std::string WorkerPool::status_json() const {
  auto& s = *impl_;
  struct Row {
    json entry;
    Impl::MemberPtr member;
    pool::Phase phase = pool::Phase::starting;
    std::shared_ptr<detail::WorkerProcess> process;  // as it was under the lock: a launch sets it under the lock
  };
  std::vector<Row> rows;
  {
    std::lock_guard lock(s.mutex);
    for (pool::DeviceIndex d = 0; d < s.core.devices(); ++d) {
      for (const pool::Worker* w : s.core.workers_of(d)) {
        const auto m = s.member(w->id);
        if (!m) continue;
        const std::string state = w->phase == pool::Phase::starting ? "starting" : w->phase == pool::Phase::failed ? "failed" : w->up() ? "ready" : "stopped";
        rows.push_back({json{{"device", m->device.to_string()}, {"role", pool::to_string(w->role)}, {"state", state},
                             {"phase", pool::to_string(w->phase)}, {"pid", m->pid}, {"error", m->error ? m->error->what() : ""},
                             {"visible_devices", m->visible_devices}, {"ready_ms", m->ready_ms}, {"restarts", w->restarts},
                             {"sessions", json::array()}, {"parked", w->phase == pool::Phase::parked}, {"unloaded", unloaded_models(*w)}},
                        m, w->phase, m->process});
      }
    }
  }
  // Every worker that is up and not parked is asked at once, each on its own status channel; what has
  // not answered within kStatusWaitS is shown as it last answered.
  const int64_t asked_ns = monotonic_ns();
  for (auto& row : rows) {
    const Impl::MemberPtr m = row.member;
    if (!row.process || row.phase == pool::Phase::parked || row.phase == pool::Phase::starting || row.phase == pool::Phase::failed) continue;
    std::lock_guard lock(s.mutex);
    if (m->status_in_flight || s.core.is_stopping()) continue;
    m->status_in_flight = true;
    s.in_background([&s, m] {
      json answer;
      try {
        answer = s.ask_status(*m, /*with_plans=*/true, kStatusTimeoutS);
      } catch (const std::exception& e) {
        answer = {{"error", Error::from(e).what()}};
      }
      std::lock_guard answered(s.mutex);
      m->last_status = std::move(answer);
      m->last_status_ns = monotonic_ns();
      m->status_in_flight = false;
      s.changed.notify_all();
    });
  }
  {
    std::unique_lock lock(s.mutex);
    detail::wait_until(s.changed, lock, detail::deadline_in(kStatusWaitS, monotonic_ns()), [&] {
      return std::none_of(rows.begin(), rows.end(), [](const Row& r) { return r.member->status_in_flight; });
    });
  }
  const auto gpu_memory = detail::Nvml::instance().memory_by_process();
  json devices = json::array();
  uint64_t total_pss = 0;
  uint64_t total_gpu = 0;
  int workers = 0;
  for (auto& [d, m, phase, process] : rows) {
    if (process && process->alive()) {
      ++workers;
      const int pid = process->pid();
      const bool parked = phase == pool::Phase::parked;
      const detail::ProcessMemory host = detail::process_memory(pid);
      d["host_pss_bytes"] = host.pss_bytes;
      d["host_rss_bytes"] = host.rss_bytes;
      total_pss += host.pss_bytes;
      const auto gpu = gpu_memory.find(pid);
      // NVML lists the processes that hold GPU memory, in the driver's pid namespace: a GPU worker it
      // does not list holds none (parked) or cannot be told apart (a container's own pid namespace).
      std::optional<uint64_t> gpu_bytes;
      if (m->device.is_gpu()) {
        const bool known = gpu != gpu_memory.end() || parked || (!gpu_memory.empty() && detail::Nvml::instance().ok());
        if (known) gpu_bytes = gpu != gpu_memory.end() ? gpu->second : 0;
        if (gpu != gpu_memory.end()) total_gpu += gpu->second;
      } else {
        gpu_bytes = 0;
      }
      d["gpu_memory_bytes"] = gpu_bytes ? json(*gpu_bytes) : json(nullptr);
      std::lock_guard lock(s.mutex);
      d["park_note"] = m->park_note;
      if (parked) d["parked_s"] = static_cast<double>(monotonic_ns() - m->parked_since_ns) / 1e9;
      const json& said = parked && !m->parked_status.is_null() ? m->parked_status : m->last_status;
      if (said.contains("sessions")) {
        json sessions = said.at("sessions");
        // What each session holds of its own: a worker's memory beyond what it held blank (host: memory
        // no file backs, which no other worker shares), where it holds that one session only (else
        // unknown: sessions_memory says what they hold together).
        json added = json::object();
        if (m->blank_host_anonymous && !parked) added["host_bytes"] = host.anonymous_pss_bytes - std::min(host.anonymous_pss_bytes, *m->blank_host_anonymous);
        if (m->blank_gpu_bytes && gpu_bytes && !parked) added["gpu_bytes"] = *gpu_bytes - std::min(*gpu_bytes, *m->blank_gpu_bytes);
        d["sessions_memory"] = added.empty() ? json(nullptr) : added;
        for (auto& session : sessions) {
          session["model"] = detail::absolute_in(session.value("model", ""), m->folder);
          session["own_memory"] = sessions.size() == 1 && !added.empty() ? added : json(nullptr);
        }
        tell_apart(sessions);
        d["sessions"] = std::move(sessions);
      }
      if (said.contains("max_resident_sessions")) d["max_resident_sessions"] = said.at("max_resident_sessions");
      if (said.contains("error") && !parked) d["error"] = said.at("error");
      if (!parked && m->status_in_flight) {
        d["answered"] = false;
        d["note"] = m->last_status_ns == 0 ? fmt::format("busy: no answer within {:g} s", kStatusWaitS)
                                           : fmt::format("busy: no answer within {:g} s; its sessions as it said {:.0f} s ago", kStatusWaitS,
                                                         static_cast<double>(asked_ns - m->last_status_ns) / 1e9);
      }
    }
    devices.push_back(std::move(d));
  }
  json total = {{"workers", workers}, {"host_pss_bytes", total_pss}, {"gpu_memory_bytes", total_gpu}};
  return json{{"ortfleet_pool", 1}, {"devices", devices}, {"total", total}}.dump();
}

}  // namespace ortfleet
