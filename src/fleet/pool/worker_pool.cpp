#include "ortfleet/fleet/worker_pool.hpp"

#include <fcntl.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/cache/crash_records.hpp"
#include "fleet/pool/worker_parking.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "fleet/worker/worker_proof.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {
using nlohmann::json;

namespace {
/// What tells one model file from another for the pool: its path and identity (a changed file is new).
std::string model_identity(const std::string& model) {
  const std::string record = detail::crash_record_path(model, /*make_folder=*/false);
  return record.empty() ? model : record;
}
}  // namespace

struct WorkerPool::Impl {
  PoolOptions options;
  std::string executable;
  int64_t start_ns = 0;

  struct Slot {
    PoolWorkerStatus status;
    std::shared_ptr<detail::WorkerProcess> worker;  // set once initialised
    std::shared_ptr<detail::WorkerProcess> starting;  // while it initialises: end_workers() ends it too
    std::optional<Error> error;
    std::thread starter;
  };
  mutable std::mutex mutex;
  std::condition_variable changed;
  std::vector<Slot> slots;
  std::vector<Slot> spares;  // per device (same index), when options.isolate_new_models
  /// Workers that were spares and keep the sessions of the model first started on them.
  std::vector<std::shared_ptr<detail::WorkerProcess>> isolated;
  std::set<std::string> proven;  // model identities that ran in this pool
  /// Where a model first ran (identity@device): its resident sessions are there, so later starts go there.
  std::map<std::string, std::weak_ptr<detail::WorkerProcess>> home;
  bool stopping = false;
  detail::WorkerParking parking;

  /// Every worker that runs: shared, spare and isolated.
  std::vector<std::shared_ptr<detail::WorkerProcess>> all_workers() const {
    std::lock_guard lock(mutex);
    std::vector<std::shared_ptr<detail::WorkerProcess>> out;
    for (const auto* list : {&slots, &spares}) {
      for (const auto& slot : *list) {
        if (slot.worker && slot.worker->alive()) out.push_back(slot.worker);
      }
    }
    for (const auto& w : isolated) {
      if (w->alive()) out.push_back(w);
    }
    return out;
  }

  /// `worker`, restored first if it is parked. A worker the driver cannot restore is ended (the pool
  /// replaces it) and the error thrown.
  void restore(const std::shared_ptr<detail::WorkerProcess>& worker) {
    try {
      parking.unpark(*worker);
    } catch (const Error& e) {
      spdlog::warn("{}: {}; ending that worker (pid {})", worker->device().to_string(), e.what(), worker->pid());
      worker->terminate(0.5);
      parking.forget(*worker);
      throw;
    }
  }

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

  /// Waits (holding `lock`) until list[i]'s worker is initialised or failed; throws when `timeout_s`
  /// passes first. `which` names it in the error ("worker", "spare worker").
  void await_settled(std::unique_lock<std::mutex>& lock, std::vector<Slot>& list, size_t i, double timeout_s, const char* which) {
    const int64_t deadline = detail::deadline_in(timeout_s, monotonic_ns());
    if (detail::wait_until(changed, lock, deadline, [&] { return list[i].status.state != "starting"; })) return;
    const std::string device = list[i].status.device.to_string();
    throw Error("the pool's " + std::string(which) + " for " + device + " was not initialised within " + detail::seconds_text(timeout_s),
                "It is still loading ONNX Runtime and the CUDA EP; wait longer (raise the start timeout) or check "
                "`ortfleet pool status`",
                device);
  }

  /// Spawns and initialises the worker of list[i] (slots or spares; on its own thread); the slot
  /// says how it went.
  void launch(size_t i, std::vector<Slot>* list = nullptr) {
    std::vector<Slot>& chosen = list != nullptr ? *list : slots;
    chosen[i].status.state = "starting";
    chosen[i].status.error.clear();
    chosen[i].error.reset();
    if (chosen[i].starter.joinable()) chosen[i].starter.join();
    chosen[i].starter = std::thread([this, i, &chosen] {
      const Device device = chosen[i].status.device;
      std::shared_ptr<detail::WorkerProcess> worker;
      try {
        worker = std::make_shared<detail::WorkerProcess>(executable, device, options.narrow_workers);
        {
          std::lock_guard lock(mutex);
          chosen[i].status.pid = worker->pid();
          chosen[i].status.visible_devices = worker->visible_devices();
          chosen[i].starting = worker;
        }
        worker->initialise(init_plan(device), options.max_resident_sessions, options.prime_libraries, options.start_timeout_s);
        std::lock_guard lock(mutex);
        chosen[i].starting.reset();
        chosen[i].worker = std::move(worker);
        chosen[i].status.state = "ready";
        chosen[i].status.ready_ms = static_cast<double>(monotonic_ns() - start_ns) / 1e6;
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        chosen[i].starting.reset();
        chosen[i].error = Error::from(e).at(device.to_string());
        chosen[i].status.state = "failed";
        chosen[i].status.error = chosen[i].error->what();
      }
      changed.notify_all();
    });
  }
};

WorkerPool::WorkerPool(PoolOptions options) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  if (options.devices.empty()) options.devices = select_devices("all").devices;
  check_cpu_devices_fit(options.devices);  // a pool never holds more CPU workers than the machine has cores
  if (!(options.start_timeout_s > 0)) throw Error("the pool's start timeout must be a positive number of seconds", "Give e.g. 600");
  options.ort_library = detail::resolve_ort_library(options.ort_library);
  s.executable = detail::find_worker_executable(options.worker_executable);
  s.options = std::move(options);
  s.start_ns = monotonic_ns();
  s.slots.resize(s.options.devices.size());
  if (s.options.isolate_new_models) s.spares.resize(s.options.devices.size());
  std::lock_guard lock(s.mutex);
  for (size_t i = 0; i < s.slots.size(); ++i) {
    s.slots[i].status.device = s.options.devices[i];
    s.launch(i);
  }
  for (size_t i = 0; i < s.spares.size(); ++i) {
    s.spares[i].status.device = s.options.devices[i];
    s.launch(i, &s.spares);
  }
}

WorkerPool::~WorkerPool() {
  auto& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
  }
  for (auto* list : {&s.slots, &s.spares}) {
    for (auto& slot : *list) {
      if (slot.starter.joinable()) slot.starter.join();
    }
  }
  std::vector<std::shared_ptr<detail::WorkerProcess>> workers;
  {
    std::lock_guard lock(s.mutex);
    for (auto* list : {&s.slots, &s.spares}) {
      for (auto& slot : *list) workers.push_back(std::move(slot.worker));
    }
    for (auto& w : s.isolated) workers.push_back(std::move(w));
  }
  // Stopped in parallel: each gives its worker time to free its GPU memory. A parked worker holds no
  // GPU memory and would block in its first CUDA call: it is ended by signal.
  std::vector<std::thread> stops;
  for (auto& w : workers) {
    if (!w) continue;
    if (s.parking.seen(*w).parked) stops.emplace_back([w] { w->terminate(2); });
    else stops.emplace_back([w] { w->stop(); });
  }
  for (auto& t : stops) t.join();
}

void WorkerPool::end_workers(double grace_s) {
  auto& s = *impl_;
  std::vector<std::shared_ptr<detail::WorkerProcess>> workers;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
    for (const auto* list : {&s.slots, &s.spares}) {
      for (const auto& slot : *list) {
        for (const auto* w : {&slot.worker, &slot.starting}) {
          if (*w) workers.push_back(*w);
        }
      }
    }
    workers.insert(workers.end(), s.isolated.begin(), s.isolated.end());
  }
  std::vector<std::thread> ends;
  for (auto& w : workers) ends.emplace_back([w, grace_s] { w->terminate(grace_s); });
  for (auto& t : ends) t.join();
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

namespace {
/// A worker's own sessions and GPU memory into `d`: its "status" answer, or while it is parked what it
/// said just before (it would not answer: its CUDA calls are locked), with no GPU memory held.
void add_worker_status(json& d, detail::WorkerProcess& worker, const detail::WorkerParking& parking) {
  const auto seen = parking.seen(worker);
  d["parked"] = seen.parked;
  d["park_note"] = seen.note;
  d["host_memory_bytes"] = detail::resident_bytes(worker.pid());
  if (seen.parked) {
    d["parked_s"] = seen.parked_s;
    d["sessions"] = seen.status.value("sessions", json::array());
    d["max_resident_sessions"] = seen.status.value("max_resident_sessions", 0);
    d["memory_bytes"] = 0;
    return;
  }
  try {
    const json answer = worker.channel().call(detail::message::status, nullptr, 10).body;
    d["sessions"] = answer.at("sessions");
    d["memory_bytes"] = answer.at("memory_bytes");
    d["max_resident_sessions"] = answer.at("max_resident_sessions");
  } catch (const std::exception& e) {
    d["error"] = Error::from(e).what();
  }
}

json worker_entry(const PoolWorkerStatus& st, const char* role) {
  return {{"device", st.device.to_string()}, {"role", role}, {"state", st.state}, {"pid", st.pid}, {"error", st.error},
          {"visible_devices", st.visible_devices}, {"ready_ms", st.ready_ms}, {"restarts", st.restarts},
          {"sessions", json::array()}, {"memory_bytes", 0}, {"parked", false}};
}
}  // namespace

std::string WorkerPool::status_json() const {
  auto& s = *impl_;
  json devices = json::array();
  // The shared worker of each device, then its spare (a model new to the pool starts there), then the
  // workers that keep the sessions of the models first started on a spare or handed over by a job.
  std::vector<std::pair<json, std::shared_ptr<detail::WorkerProcess>>> rows;
  {
    std::lock_guard lock(s.mutex);
    for (const auto& [list, role] : {std::pair{&s.slots, "shared"}, std::pair{&s.spares, "spare"}}) {
      for (const auto& slot : *list) rows.emplace_back(worker_entry(slot.status, role), slot.status.state == "ready" ? slot.worker : nullptr);
    }
    for (const auto& w : s.isolated) {
      PoolWorkerStatus st;
      st.device = w->device();
      st.state = w->alive() ? "ready" : "stopped";
      st.pid = w->pid();
      st.visible_devices = w->visible_devices();
      rows.emplace_back(worker_entry(st, "isolated"), w);
    }
  }
  for (auto& [d, worker] : rows) {
    if (worker && worker->alive()) add_worker_status(d, *worker, s.parking);
    devices.push_back(std::move(d));
  }
  return json{{"ortfleet_pool", 1}, {"devices", devices}}.dump();
}

void WorkerPool::start_failed(const std::shared_ptr<detail::WorkerProcess>& worker, const std::string& model, const Device& device) {
  auto& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    if (std::find(s.isolated.begin(), s.isolated.end(), worker) == s.isolated.end()) return;  // shared: others' sessions live there
  }
  bool holds_nothing = !worker->alive();
  if (!holds_nothing) {
    try {
      holds_nothing = worker->channel().call(detail::message::status, nullptr, 10).body.at("sessions").empty();
    } catch (const std::exception&) {
      holds_nothing = true;  // not answering after a failed start: of no use to anyone
    }
  }
  if (!holds_nothing) return;
  spdlog::info("{}: the worker (pid {}) that failed to start {} holds nothing: stopping it", device.to_string(), worker->pid(), model);
  worker->stop();
  std::lock_guard lock(s.mutex);
  s.isolated.erase(std::remove(s.isolated.begin(), s.isolated.end(), worker), s.isolated.end());
  s.home.erase(model_identity(model) + "@" + device.to_string());
  s.parking.forget(*worker);
}

size_t WorkerPool::evict() {
  size_t dropped = 0;
  for (const auto& d : devices()) {
    std::shared_ptr<detail::WorkerProcess> worker;
    {
      std::lock_guard lock(impl_->mutex);
      worker = impl_->slots[impl_->index_of(d)].worker;
    }
    if (!worker || !worker->alive()) continue;
    impl_->restore(worker);  // a parked worker frees its sessions' memory in its own CUDA calls
    dropped += worker->channel().call(detail::message::evict, nullptr, 60).body.value("count", size_t{0});
  }
  // An isolated worker whose sessions are all gone (its job ended) goes too.
  std::vector<std::shared_ptr<detail::WorkerProcess>> isolated;
  {
    std::lock_guard lock(impl_->mutex);
    isolated = impl_->isolated;
  }
  for (const auto& w : isolated) {
    bool idle = !w->alive();
    if (!idle) {
      try {
        impl_->restore(w);
        dropped += w->channel().call(detail::message::evict, nullptr, 60).body.value("count", size_t{0});
        idle = w->channel().call(detail::message::status, nullptr, 10).body.at("sessions").empty();
      } catch (const std::exception& e) {
        spdlog::debug("an isolated worker (pid {}) did not answer: {}", w->pid(), e.what());
      }
    }
    if (!idle) continue;
    w->stop();
    std::lock_guard lock(impl_->mutex);
    impl_->isolated.erase(std::remove(impl_->isolated.begin(), impl_->isolated.end(), w), impl_->isolated.end());
  }
  return dropped;
}


void WorkerPool::mark_proven(const std::string& model) {
  std::lock_guard lock(impl_->mutex);
  impl_->proven.insert(model_identity(model));
}

std::shared_ptr<detail::WorkerProcess> WorkerPool::worker_for(const Device& device, const std::string& model, double timeout_s) {
  auto& s = *impl_;
  if (const auto crash = detail::known_crash(model)) {
    throw Error(model + " crashed ONNX Runtime on this machine before, so the pool refuses it until the model file changes (" + *crash + ")",
                "Find the node that crashes: ortfleet doctor " + model + " --locate-crash --device " + device.to_string(), device.to_string());
  }
  const std::string identity = model_identity(model);
  const std::string at = identity + "@" + device.to_string();
  bool shared = false;
  std::shared_ptr<detail::WorkerProcess> home;
  {
    std::lock_guard lock(s.mutex);
    const bool proven = s.proven.count(identity) != 0;
    if (const auto first = s.home.find(at); proven && first != s.home.end()) {
      // Its first worker keeps its sessions (resident for this start) as long as it lives.
      home = first->second.lock();
      if (!home || !home->alive()) {
        home.reset();
        s.home.erase(first);
      }
    }
    shared = proven || s.spares.empty();
  }
  if (home) {
    try {
      s.restore(home);
      return home;
    } catch (const Error&) {
      std::lock_guard lock(s.mutex);
      s.home.erase(at);  // its sessions are gone with it: the shared worker starts the model anew
    }
  }
  if (shared) return worker(device, timeout_s);
  std::unique_lock lock(s.mutex);
  const size_t i = s.index_of(device);
  s.await_settled(lock, s.spares, i, timeout_s, "spare worker");
  if (s.spares[i].error || !s.spares[i].worker || !s.spares[i].worker->alive()) {
    spdlog::warn("{}: the pool has no spare worker ({}): {} starts in the shared worker, unisolated", device.to_string(),
                 s.spares[i].error ? s.spares[i].error->what() : "it stopped", model);
    if (!s.stopping) s.launch(i, &s.spares);
    lock.unlock();
    return worker(device, timeout_s);
  }
  // The spare becomes this model's worker; a new spare warms up for the next new model.
  auto taken = std::move(s.spares[i].worker);
  s.isolated.push_back(taken);
  s.home[at] = taken;
  if (!s.stopping) s.launch(i, &s.spares);
  lock.unlock();
  s.restore(taken);
  return taken;
}

void WorkerPool::adopt(detail::AdoptedWorker adopted, const std::string& model, int log_fd) {
  auto& s = *impl_;
  const Device device = adopted.device;
  {
    std::lock_guard lock(s.mutex);
    s.index_of(device);  // a device of this pool, or refused
  }
  // The channel must lead to the very process the job named, a worker: a hand-over never makes this
  // pool watch, or one day signal, any other process.
  adopted.watch = detail::prove_worker(adopted.channel.get(), adopted.pid, s.executable);
  auto worker = std::make_shared<detail::WorkerProcess>(std::move(adopted));
  try {
    worker->channel().call(detail::message::adopt, nullptr, 10, {log_fd});
  } catch (const Error&) {
    worker->handed_over();  // not ours after all: closed, never signalled
    throw;
  }
  const std::string identity = model_identity(model);
  std::lock_guard lock(s.mutex);
  s.proven.insert(identity);  // it ran in the job that handed it over
  s.home[identity + "@" + device.to_string()] = worker;
  s.isolated.push_back(worker);
  spdlog::info("{}: took over the job's worker (pid {}) with {} loaded", device.to_string(), worker->pid(), model);
}

ParkOutcome WorkerPool::park_workers(double lock_timeout_s) {
  auto& s = *impl_;
  std::vector<std::shared_ptr<detail::WorkerProcess>> workers;
  std::vector<json> statuses;
  for (auto& w : s.all_workers()) {
    const auto seen = s.parking.seen(*w);
    if (seen.parked || seen.refused) continue;
    json said;
    try {
      said = w->channel().call(detail::message::status, nullptr, 10).body;
    } catch (const std::exception& e) {
      continue;  // busy or gone: not parked this time
    }
    workers.push_back(std::move(w));
    statuses.push_back(std::move(said));
  }
  const auto done = s.parking.park(workers, statuses, lock_timeout_s);
  return ParkOutcome{done.parked, done.kept, done.wall_ms};
}

size_t WorkerPool::parked_workers() const {
  size_t n = 0;
  for (const auto& w : impl_->all_workers()) n += impl_->parking.seen(*w).parked ? 1 : 0;
  return n;
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
  for (int attempt = 0;; ++attempt) {
    restart_dead_workers();
    std::shared_ptr<detail::WorkerProcess> chosen;
    {
      std::unique_lock lock(s.mutex);
      const size_t i = s.index_of(device);
      s.await_settled(lock, s.slots, i, timeout_s, "worker");
      if (s.slots[i].error) throw Error("the pool's worker for " + device.to_string() + " failed: " + s.slots[i].error->what_failed(),
                                        s.slots[i].error->hint(), device.to_string());
      chosen = s.slots[i].worker;
    }
    try {
      s.restore(chosen);
      return chosen;
    } catch (const Error&) {
      if (attempt > 0) throw;  // a new worker is started in its place once
    }
  }
}

}  // namespace ortfleet
