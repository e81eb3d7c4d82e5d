#include "ortfleet/fleet/worker_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "fleet/worker_channel.hpp"
#include "fleet/worker_protocol.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {
using nlohmann::json;

struct WorkerPool::Impl {
  PoolOptions options;
  std::string executable;
  int64_t start_ns = 0;

  struct Slot {
    PoolWorkerStatus status;
    std::shared_ptr<detail::WorkerProcess> worker;  // set once initialised
    std::optional<Error> error;
    std::thread starter;
  };
  mutable std::mutex mutex;
  std::condition_variable changed;
  std::vector<Slot> slots;
  bool stopping = false;

  size_t index_of(const Device& d) const {
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].status.device == d) return i;
    }
    throw Error(d.to_string() + " is not in this worker pool (it has " + to_string(options.devices) + ")",
                "Start the pool with that device too, or use one of its devices", d.to_string());
  }

  detail::LocalStartPlan init_plan(const Device& device) const {
    detail::LocalStartPlan plan;
    plan.devices = {device};
    plan.config = options.config;
    plan.fleet_size = static_cast<int>(options.devices.size());
    plan.ort_library = options.ort_library;
    return plan;
  }

  /// Spawns and initialises slot i's worker (on its own thread); the slot says how it went.
  void launch(size_t i) {
    slots[i].status.state = "starting";
    slots[i].status.error.clear();
    slots[i].error.reset();
    if (slots[i].starter.joinable()) slots[i].starter.join();
    slots[i].starter = std::thread([this, i] {
      const Device device = slots[i].status.device;
      std::shared_ptr<detail::WorkerProcess> worker;
      try {
        worker = std::make_shared<detail::WorkerProcess>(executable, device, options.narrow_workers);
        {
          std::lock_guard lock(mutex);
          slots[i].status.pid = worker->pid();
          slots[i].status.visible_devices = worker->visible_devices();
        }
        worker->initialise(init_plan(device), options.max_resident_sessions, options.prime_libraries, options.start_timeout_s);
        std::lock_guard lock(mutex);
        slots[i].worker = std::move(worker);
        slots[i].status.state = "ready";
        slots[i].status.ready_ms = static_cast<double>(monotonic_ns() - start_ns) / 1e6;
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        slots[i].error = Error::from(e).at(device.to_string());
        slots[i].status.state = "failed";
        slots[i].status.error = slots[i].error->what();
      }
      changed.notify_all();
    });
  }
};

WorkerPool::WorkerPool(PoolOptions options) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  if (options.devices.empty()) options.devices = parse_devices("all", gpu_count());
  if (!(options.start_timeout_s > 0)) throw Error("the pool's start timeout must be a positive number of seconds", "Give e.g. 600");
  options.ort_library = detail::resolve_ort_library(options.ort_library);
  s.executable = detail::find_worker_executable(options.worker_executable);
  s.options = std::move(options);
  s.start_ns = monotonic_ns();
  s.slots.resize(s.options.devices.size());
  std::lock_guard lock(s.mutex);
  for (size_t i = 0; i < s.slots.size(); ++i) {
    s.slots[i].status.device = s.options.devices[i];
    s.launch(i);
  }
}

WorkerPool::~WorkerPool() {
  auto& s = *impl_;
  for (auto& slot : s.slots) {
    if (slot.starter.joinable()) slot.starter.join();
  }
  std::vector<std::shared_ptr<detail::WorkerProcess>> workers;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
    for (auto& slot : s.slots) workers.push_back(std::move(slot.worker));
  }
  // Stopped in parallel: each gives its worker time to free its GPU memory.
  std::vector<std::thread> stops;
  for (auto& w : workers) {
    if (w) stops.emplace_back([w] { w->stop(); });
  }
  for (auto& t : stops) t.join();
}

bool WorkerPool::wait(double timeout_s) {
  auto& s = *impl_;
  const int64_t deadline = detail::deadline_in(timeout_s, monotonic_ns());
  std::unique_lock lock(s.mutex);
  const auto settled = [&] {
    return std::none_of(s.slots.begin(), s.slots.end(), [](const Impl::Slot& slot) { return slot.status.state == "starting"; });
  };
  if (!detail::wait_until(s.changed, lock, deadline, settled)) return false;
  return std::all_of(s.slots.begin(), s.slots.end(), [](const Impl::Slot& slot) { return slot.status.state == "ready"; });
}

const std::vector<Device>& WorkerPool::devices() const { return impl_->options.devices; }
const PoolOptions& WorkerPool::options() const { return impl_->options; }

std::vector<PoolWorkerStatus> WorkerPool::status() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<PoolWorkerStatus> out;
  for (const auto& slot : impl_->slots) out.push_back(slot.status);
  return out;
}

std::string WorkerPool::status_json() const {
  json devices = json::array();
  for (const auto& st : status()) {
    json d = {{"device", st.device.to_string()}, {"state", st.state}, {"pid", st.pid}, {"error", st.error},
              {"visible_devices", st.visible_devices}, {"ready_ms", st.ready_ms}, {"restarts", st.restarts},
              {"sessions", json::array()}, {"memory_bytes", 0}};
    std::shared_ptr<detail::WorkerProcess> worker;
    {
      std::lock_guard lock(impl_->mutex);
      worker = impl_->slots[impl_->index_of(st.device)].worker;
    }
    if (worker && st.state == "ready") {
      try {
        const json answer = worker->channel().call(detail::message::status, nullptr, 10).body;
        d["sessions"] = answer.at("sessions");
        d["memory_bytes"] = answer.at("memory_bytes");
        d["max_resident_sessions"] = answer.at("max_resident_sessions");
      } catch (const std::exception& e) {
        d["error"] = Error::from(e).what();
      }
    }
    devices.push_back(std::move(d));
  }
  return json{{"ortfleet_pool", 1}, {"devices", devices}}.dump();
}

size_t WorkerPool::evict() {
  size_t dropped = 0;
  for (const auto& d : devices()) {
    std::shared_ptr<detail::WorkerProcess> worker;
    {
      std::lock_guard lock(impl_->mutex);
      worker = impl_->slots[impl_->index_of(d)].worker;
    }
    if (worker && worker->alive()) dropped += worker->channel().call(detail::message::evict, nullptr, 60).body.value("count", size_t{0});
  }
  return dropped;
}

int WorkerPool::restart_dead_workers() {
  auto& s = *impl_;
  int restarted = 0;
  std::lock_guard lock(s.mutex);
  if (s.stopping) return 0;
  for (size_t i = 0; i < s.slots.size(); ++i) {
    auto& slot = s.slots[i];
    if (slot.status.state != "ready" || !slot.worker) continue;
    const std::string ended = slot.worker->exited();
    if (ended.empty() && slot.worker->alive()) continue;
    spdlog::warn("the worker for {} (pid {}) {}; starting a new one", slot.status.device.to_string(), slot.status.pid,
                 ended.empty() ? "stopped answering" : ended);
    slot.worker.reset();
    ++slot.status.restarts;
    s.launch(i);
    ++restarted;
  }
  return restarted;
}

std::shared_ptr<detail::WorkerProcess> WorkerPool::worker(const Device& device, double timeout_s) {
  auto& s = *impl_;
  restart_dead_workers();
  const int64_t deadline = detail::deadline_in(timeout_s, monotonic_ns());
  std::unique_lock lock(s.mutex);
  const size_t i = s.index_of(device);
  if (!detail::wait_until(s.changed, lock, deadline, [&] { return s.slots[i].status.state != "starting"; })) {
    throw Error("the pool's worker for " + device.to_string() + " was not initialised within " + detail::seconds_text(timeout_s),
                "It is still loading ONNX Runtime and the CUDA EP; wait longer (raise the start timeout) or check "
                "`ortfleet pool status`",
                device.to_string());
  }
  if (s.slots[i].error) throw Error("the pool's worker for " + device.to_string() + " failed: " + s.slots[i].error->what_failed(),
                                    s.slots[i].error->hint(), device.to_string());
  return s.slots[i].worker;
}

}  // namespace ortfleet
