// WorkerPool's face (ortfleet/fleet/worker_pool.hpp): each call asks the pool's core (pool_core.hpp) and
// carries out what it decides (pool_executor.hpp).
#include "ortfleet/fleet/worker_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "engine/cache/crash_records.hpp"
#include "engine/cuda/nvml.hpp"
#include "fleet/pool/pool_executor.hpp"
#include "fleet/pool/pool_paths.hpp"
#include "fleet/pool/worker_parking.hpp"
#include "fleet/worker/worker_proof.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {
using nlohmann::json;

WorkerPool::WorkerPool(PoolOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  auto& s = *impl_;
  std::unique_lock lock(s.mutex);
  // NVML, for `pool status`'s GPU memory per worker, is loaded off the path of any request (its first
  // initialisation takes up to a second on a node of several GPUs).
  s.in_background([] { detail::Nvml::instance(); });
  s.carry_out(lock, s.core.initial_actions());
}

WorkerPool::~WorkerPool() {
  auto& s = *impl_;
  std::vector<Impl::MemberPtr> members;
  std::vector<std::thread> ends;
  {
    std::lock_guard lock(s.mutex);
    s.core.stopping();
    for (const auto& [id, m] : s.members) {
      members.push_back(m);
      // A worker still starting (loading the runtime, priming: seconds on a GPU) is ended rather than
      // waited for: nothing was given to it yet.
      if (auto w = m->starting) ends.emplace_back([w] { w->terminate(2); });
    }
  }
  for (auto& t : ends) t.join();
  // Stopped in parallel: each gives its worker time to free its GPU memory. A parked worker holds no
  // GPU memory and would block in its first CUDA call: it is ended by signal.
  std::vector<std::thread> stops;
  for (auto& m : members) {
    std::shared_ptr<detail::WorkerProcess> process;
    bool parked = false;
    {
      std::lock_guard lock(s.mutex);
      process = m->process;
      const pool::Worker* w = s.core.find(m->id);
      parked = w != nullptr && (w->phase == pool::Phase::parked || w->restore_pending);
    }
    if (!process) continue;
    stops.emplace_back([process, parked] {
      if (parked) process->terminate(2);
      else process->stop();
    });
  }
  for (auto& t : stops) t.join();
  // Starters and background stops end meanwhile; joined last (they take the mutex as they end).
  for (;;) {
    std::list<Impl::Background> background;
    {
      std::lock_guard lock(s.mutex);
      background.swap(s.background);
    }
    if (background.empty()) break;
    for (auto& b : background) b.thread.join();
  }
}

void WorkerPool::end_workers(double grace_s) {
  auto& s = *impl_;
  std::vector<std::shared_ptr<detail::WorkerProcess>> workers;
  {
    std::lock_guard lock(s.mutex);
    s.core.stopping();
    for (const auto& [id, m] : s.members) {
      for (const auto* w : {&m->process, &m->starting}) {
        if (*w) workers.push_back(*w);
      }
    }
  }
  std::vector<std::thread> ends;
  for (auto& w : workers) ends.emplace_back([w, grace_s] { w->terminate(grace_s); });
  for (auto& t : ends) t.join();
}

bool WorkerPool::wait(double timeout_s) {
  auto& s = *impl_;
  const int64_t deadline = detail::deadline_in(timeout_s, monotonic_ns());
  std::unique_lock lock(s.mutex);
  const auto shared_phases = [&](pool::Phase phase) {
    size_t n = 0;
    for (pool::DeviceIndex d = 0; d < s.core.devices(); ++d) n += s.core.shared(d).phase == phase ? 1 : 0;
    return n;
  };
  if (!detail::wait_until(s.changed, lock, deadline, [&] { return shared_phases(pool::Phase::starting) == 0; })) return false;
  for (pool::DeviceIndex d = 0; d < s.core.devices(); ++d) {
    if (!s.core.shared(d).up()) return false;
  }
  return true;
}

const std::vector<Device>& WorkerPool::devices() const { return impl_->options.devices; }
const PoolOptions& WorkerPool::options() const { return impl_->options; }

std::vector<PoolWorkerStatus> WorkerPool::status() const {
  auto& s = *impl_;
  std::lock_guard lock(s.mutex);
  std::vector<PoolWorkerStatus> out;
  for (pool::DeviceIndex d = 0; d < s.core.devices(); ++d) {
    const pool::Worker& w = s.core.shared(d);
    PoolWorkerStatus st;
    st.device = s.options.devices[d];
    st.state = w.phase == pool::Phase::starting ? "starting" : w.phase == pool::Phase::failed ? "failed" : w.up() ? "ready" : "stopped";
    st.restarts = w.restarts;
    if (const auto m = s.member(w.id)) {
      st.pid = m->pid;
      st.visible_devices = m->visible_devices;
      st.ready_ms = m->ready_ms;
      if (m->error) st.error = m->error->what();
    }
    out.push_back(std::move(st));
  }
  return out;
}

std::shared_ptr<detail::WorkerProcess> WorkerPool::worker_for(const Device& device, const std::string& model, double timeout_s) {
  auto& s = *impl_;
  if (const auto crash = detail::known_crash(model)) {
    throw Error(model + " crashed ONNX Runtime on this machine before, so the pool refuses it until the model file changes (" + *crash + ")",
                "Find the node that crashes: ortfleet doctor " + model + " --locate-crash --device " + device.to_string(), device.to_string());
  }
  const pool::DeviceIndex index = s.index_of(device);
  const pool::ClaimRequest request{index, Impl::model_key(model)};
  for (int attempt = 0;; ++attempt) {
    keep_up();
    Impl::MemberPtr chosen;
    {
      pool::ClaimFacts facts;
      std::unique_lock lock(s.mutex);
      while (!chosen) {
        const pool::ClaimDecision d = s.core.claim(request, facts);
        s.carry_out(lock, d.actions);
        switch (d.kind) {
          case pool::ClaimDecision::Kind::granted:
            chosen = s.member(d.worker);
            if (d.unisolated) {
              spdlog::warn("{}: no worker of its own could be started for a new model ({}): it starts in the shared worker, unisolated",
                           device.to_string(), model);
            }
            if (!chosen || !chosen->process) throw Error("the pool's worker for " + device.to_string() + " is gone", "Start again", device.to_string());
            break;
          case pool::ClaimDecision::Kind::wait_for: s.await_up(lock, d.worker, timeout_s, d.waiting_for); break;
          case pool::ClaimDecision::Kind::ask_holders: {
            const Impl::MemberPtr asked = s.member(d.worker);
            lock.unlock();
            const bool holds = !asked || s.holds_jobs_sessions(*asked);
            lock.lock();
            facts.holders[d.worker].holds = holds;
            break;
          }
          case pool::ClaimDecision::Kind::refused: {
            if (d.refusal == pool::ClaimDecision::Refusal::stopping) {
              throw Error("the pool is stopping", "Start again once it has been restarted", device.to_string());
            }
            const Impl::MemberPtr failed = s.member(d.worker);
            const Error why = failed && failed->error ? *failed->error : Error("it stopped");
            throw Error("the pool's worker for " + device.to_string() + " failed: " + why.what_failed(), why.hint(), device.to_string());
          }
        }
      }
    }
    try {
      s.restore_if_needed(chosen);
      return chosen->process;
    } catch (const Error&) {
      if (attempt > 0) throw;  // ended (and replaced): a new worker is started in its place once
    }
  }
}

void WorkerPool::start_succeeded(const std::shared_ptr<detail::WorkerProcess>& worker, const std::string& model) {
  auto& s = *impl_;
  std::unique_lock lock(s.mutex);
  const pool::WorkerId id = s.id_of(worker.get());
  const auto before = id != 0 && s.core.find(id) ? s.core.find(id)->role : pool::Role::shared;
  const pool::ModelKey key = Impl::model_key(model);
  if (const auto m = s.member(id)) m->unloaded_plans.erase(key);  // made again by this start
  s.carry_out(lock, s.core.start_done(id, key));
  if (id != 0 && before != pool::Role::shared && s.core.find(id) && s.core.find(id)->role == pool::Role::shared) {
    spdlog::info("{}: the worker pid {} holds the proven models now (the shared worker)", worker->device().to_string(), worker->pid());
  }
}

void WorkerPool::start_failed(const std::shared_ptr<detail::WorkerProcess>& worker, const std::string& model, const Device& device) {
  auto& s = *impl_;
  Impl::MemberPtr m;
  {
    std::lock_guard lock(s.mutex);
    const pool::WorkerId id = s.id_of(worker.get());
    if (id == 0 || !s.core.start_failed(id)) {
      s.changed.notify_all();
      return;
    }
    m = s.member(id);
  }
  if (!m) return;
  const bool alive = worker->alive();
  const bool empty = s.holds_nothing(*m);
  std::unique_lock lock(s.mutex);
  const auto actions = s.core.found_empty(m->id, empty, alive);
  if (!actions.empty()) spdlog::info("{}: the worker (pid {}) that failed to start {} holds nothing: stopping it", device.to_string(), m->pid, model);
  s.carry_out(lock, actions);
}

size_t WorkerPool::evict() {
  auto& s = *impl_;
  std::vector<Impl::MemberPtr> up;
  {
    std::lock_guard lock(s.mutex);
    for (const auto& [id, m] : s.members) {
      if (m->process && s.core.hold(id)) up.push_back(m);
    }
  }
  size_t dropped = 0;
  for (const auto& m : up) {
    try {
      s.restore_if_needed(m);  // a parked worker frees its sessions' memory in its own CUDA calls
      dropped += m->process->channel().call(detail::message::evict, nullptr, kWorkerRequestTimeoutS).body.value("count", size_t{0});
      const bool empty = s.ask_status(*m, false, 10).value("sessions", json::array()).empty();
      std::lock_guard lock(s.mutex);
      if (empty) s.core.emptied(m->id);
    } catch (const std::exception& e) {
      spdlog::debug("the worker pid {} did not drop its sessions: {}", m->pid, e.what());
    }
    std::lock_guard lock(s.mutex);
    s.core.release(m->id);
  }
  keep_up();  // workers that now hold nothing beyond a device's one are stopped
  return dropped;
}

int WorkerPool::keep_up() {
  auto& s = *impl_;
  std::unique_lock lock(s.mutex);
  if (s.core.is_stopping()) return 0;
  std::vector<std::pair<pool::WorkerId, Impl::MemberPtr>> dead;
  for (const auto& [id, m] : s.members) {
    const pool::Worker* w = s.core.find(id);
    if (w == nullptr || !w->up() || !m->process) continue;
    if (!m->process->exited().empty() || !m->process->alive()) dead.emplace_back(id, m);
  }
  for (const auto& [id, m] : dead) {
    const pool::Role was = s.core.find(id)->role;
    const bool shared = was == pool::Role::shared;
    const char* role = pool::to_string(was);
    std::string how = m->process->exited().empty() ? "stopped answering" : m->process->exited();
    if (const auto said = s.ended_by_client.find(m->pid); said != s.ended_by_client.end()) {
      how = said->second;  // a job ended it: not a crash, not the out-of-memory killer
      s.ended_by_client.erase(said);
    }
    s.report_death(lock, id);
    if (shared) {
      const bool spare_took_over = s.core.shared(s.index_of(m->device)).up();
      spdlog::warn("the worker for {} (pid {}) {}; {}", m->device.to_string(), m->pid, how, spare_took_over ? "its spare takes its place" : "starting a new one");
    } else {
      spdlog::info("{}: the {} worker (pid {}) {}", m->device.to_string(), role, m->pid, how);
    }
  }
  std::vector<pool::Action> actions;
  const int restarted = s.core.maintain(actions);
  s.carry_out(lock, actions);
  return restarted;
}

void WorkerPool::note_ended_by_client(int pid, const std::string& why) {
  auto& s = *impl_;
  std::lock_guard lock(s.mutex);
  for (const auto& [id, m] : s.members) {
    if (m->pid == pid) {
      s.ended_by_client[pid] = why;
      spdlog::warn("{}: the worker pid {} {}", m->device.to_string(), pid, why);
      return;
    }
  }
}

size_t WorkerPool::consolidate() {
  auto& s = *impl_;
  size_t folded = 0;
  for (pool::DeviceIndex d = 0; d < s.options.devices.size(); ++d) {
    std::vector<pool::WorkerId> candidates;
    {
      std::lock_guard lock(s.mutex);
      if (s.core.is_stopping()) return folded;
      candidates = s.core.fold_candidates(d);
    }
    for (pool::WorkerId from : candidates) folded += s.fold_in(from) ? 1 : 0;
  }
  keep_up();
  return folded;
}

void WorkerPool::adopt(detail::AdoptedWorker adopted, const std::string& model, int log_fd) {
  auto& s = *impl_;
  const Device device = adopted.device;
  const pool::DeviceIndex index = s.index_of(device);  // a device of this pool, or refused
  // The channel must lead to the very process the job named, a worker: a hand-over never makes this
  // pool watch, or one day signal, any other process.
  adopted.watch = detail::prove_worker(adopted.channel.get(), adopted.pid, s.options.worker_executable);
  auto worker = std::make_shared<detail::WorkerProcess>(std::move(adopted));
  try {
    worker->channel().call(detail::message::adopt, nullptr, 10, {log_fd});
  } catch (const Error&) {
    worker->handed_over();  // not ours after all: closed, never signalled
    throw;
  }
  auto m = std::make_shared<Impl::Member>();
  m->device = device;
  m->pid = worker->pid();
  m->visible_devices = worker->visible_devices();
  m->folder = detail::working_folder_of(worker->pid());  // where its job named its files from
  try {
    m->status_channel = std::make_unique<detail::WorkerChannel>(worker->attach({}, kWorkerRequestTimeoutS), device, worker->pid(), worker->observer_hooks());
  } catch (const Error& e) {
    spdlog::debug("{}: no status channel to the handed-over worker yet ({}): the first status makes one", device.to_string(), e.what());
  }
  m->process = std::move(worker);
  std::unique_lock lock(s.mutex);
  std::vector<pool::Action> actions;
  m->id = s.core.adopted(index, Impl::model_key(model), actions);
  s.members[m->id] = m;
  s.carry_out(lock, actions);
  spdlog::info("{}: took over the job's worker (pid {}) with {} loaded", device.to_string(), m->pid, model);
}

ParkOutcome WorkerPool::park_workers(double lock_timeout_s, const std::function<bool()>& still_idle) {
  return impl_->park_idle_workers(lock_timeout_s, still_idle);
}

}  // namespace ortfleet
