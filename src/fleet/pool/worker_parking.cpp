#include "fleet/pool/worker_parking.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "engine/providers/provider_registry.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

std::optional<std::string> WorkerParking::unavailable(const Device& device) { return provider_for(device).parking().unavailable(); }

std::shared_ptr<WorkerParking::Entry> WorkerParking::entry(const WorkerProcess& worker) {
  std::lock_guard lock(mutex_);
  auto& e = entries_[&worker];
  if (!e) e = std::make_shared<Entry>();
  return e;
}

std::shared_ptr<WorkerParking::Entry> WorkerParking::find(const WorkerProcess& worker) const {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(&worker);
  return it == entries_.end() ? nullptr : it->second;
}

WorkerParking::Outcome WorkerParking::park(const std::vector<std::shared_ptr<WorkerProcess>>& workers,
                                           const std::vector<nlohmann::json>& status, double lock_timeout_s) {
  Outcome outcome;
  const int64_t start = monotonic_ns();
  std::mutex outcome_mutex;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < workers.size(); ++i) {
    const auto& worker = workers[i];
    if (!worker || !worker->alive()) continue;
    auto e = entry(*worker);
    threads.emplace_back([&, i, worker, e] {
      std::lock_guard busy(e->busy);
      {
        std::lock_guard fields(e->fields);
        if (e->parked || e->refused) return;
      }
      std::string why;
      if (auto no = unavailable(worker->device())) {
        why = *no;
      } else {
        try {
          provider_for(worker->device()).parking().park(worker->pid(), lock_timeout_s);
          {
            std::lock_guard fields(e->fields);
            e->parked = true;
            e->since_ns = monotonic_ns();
            e->status = i < status.size() ? status[i] : nlohmann::json();
            e->note.clear();
          }
          std::lock_guard lock(outcome_mutex);
          ++outcome.parked;
          return;
        } catch (const Error& err) {
          why = err.what();
        }
      }
      {
        std::lock_guard fields(e->fields);
        e->refused = true;
        e->note = why;
      }
      std::lock_guard lock(outcome_mutex);
      outcome.kept.push_back(fmt::format("{} (pid {}): {}", worker->device().to_string(), worker->pid(), why));
    });
  }
  for (auto& t : threads) t.join();
  outcome.wall_ms = static_cast<double>(monotonic_ns() - start) / 1e6;
  return outcome;
}

void WorkerParking::unpark(const WorkerProcess& worker) {
  const auto e = find(worker);
  if (!e) return;
  std::lock_guard busy(e->busy);
  {
    std::lock_guard fields(e->fields);
    e->refused = false;  // used again: worth another try when the pool is idle next
    if (!e->parked) return;
    e->parked = false;  // restored or broken: either way no longer parked
  }
  const int64_t start = monotonic_ns();
  provider_for(worker.device()).parking().unpark(worker.pid());
  spdlog::info("{}: restored worker pid {} from its checkpoint in {:.0f} ms", worker.device().to_string(), worker.pid(),
               static_cast<double>(monotonic_ns() - start) / 1e6);
}

WorkerParking::Seen WorkerParking::seen(const WorkerProcess& worker) const {
  Seen seen;
  const auto e = find(worker);
  if (!e) return seen;
  std::lock_guard fields(e->fields);
  seen.parked = e->parked;
  seen.refused = e->refused;
  seen.note = e->note;
  seen.status = e->status;
  if (e->parked) seen.parked_s = static_cast<double>(monotonic_ns() - e->since_ns) / 1e9;
  return seen;
}

void WorkerParking::forget(const WorkerProcess& worker) {
  std::lock_guard lock(mutex_);
  entries_.erase(&worker);
}

uint64_t resident_bytes(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace ortfleet::detail
