// The pool's decisions carried out on processes and the driver (pool_executor.hpp).
#include "fleet/pool/pool_executor.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "engine/cache/crash_records.hpp"
#include "engine/cuda/nvml.hpp"
#include "fleet/pool/pool_paths.hpp"
#include "fleet/pool/worker_parking.hpp"
#include "fleet/worker/wire.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "process/process_memory.hpp"

namespace ortfleet {
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
/// A channel of its own to `worker` for status requests: one that times out gives up the channel,
/// never the worker (observer hooks).
std::unique_ptr<detail::WorkerChannel> status_channel_to(detail::WorkerProcess& worker) {
  return std::make_unique<detail::WorkerChannel>(worker.attach({}, kWorkerRequestTimeoutS), worker.device(), worker.pid(), worker.observer_hooks());
}

/// The options as the pool decides them once, for every worker it starts and what they make later.
PoolOptions chosen_options(PoolOptions options) {
  if (options.devices.empty()) options.devices = select_devices("all").devices;
  check_cpu_devices_fit(options.devices);  // a pool never holds more CPU workers than the machine has cores
  if (!(options.start_timeout_s > 0)) throw Error("the pool's start timeout must be a positive number of seconds", "Give e.g. 600");
  const detail::WorkerRuntime runtime = detail::resolve_worker_runtime(options.worker_executable, options.ort_library);
  options.ort_library = runtime.ort_library;
  options.worker_executable = runtime.executable;
  return options;
}
}  // namespace

WorkerPool::Impl::Impl(PoolOptions chosen)
    : options(chosen_options(std::move(chosen))),
      start_ns(monotonic_ns()),
      core({options.devices.size(), options.isolate_new_models},
           [](const std::string& broken) { spdlog::error("the warm pool broke its own rule: {} (please report this)", broken); }) {}

pool::ModelKey WorkerPool::Impl::model_key(const std::string& model) {
  // A changed file (another inode, size or time) is another model under the same path.
  const std::string record = detail::crash_record_path(model, /*make_folder=*/false);
  return {model, record.empty() ? model : record};
}

WorkerPool::Impl::MemberPtr WorkerPool::Impl::member(pool::WorkerId id) const {
  const auto it = members.find(id);
  return it == members.end() ? nullptr : it->second;
}

pool::DeviceIndex WorkerPool::Impl::index_of(const Device& device) const {
  for (pool::DeviceIndex i = 0; i < options.devices.size(); ++i) {
    if (options.devices[i] == device) return i;
  }
  throw Error(device.to_string() + " is not in this worker pool (it has " + to_string(options.devices) + ")",
              "Start the pool with that device too, or use one of its devices", device.to_string());
}

pool::WorkerId WorkerPool::Impl::id_of(const detail::WorkerProcess* process) const {
  for (const auto& [id, m] : members) {
    if (m->process.get() == process) return id;
  }
  return 0;
}

void WorkerPool::Impl::in_background(std::function<void()> work) {
  for (auto it = background.begin(); it != background.end();) {
    if (!it->done->load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = background.erase(it);
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  background.push_back({std::thread([work = std::move(work), done] {
                          work();
                          *done = true;
                        }),
                        done});
}

// --- carrying actions out --------------------------------------------------------------------------------

void WorkerPool::Impl::carry_out(std::unique_lock<std::mutex>& lock, const std::vector<pool::Action>& actions) {
  std::vector<pool::DropModel> drops;
  for (const auto& a : actions) {
    switch (a.kind) {
      case pool::Action::Kind::spawn: launch(a.spawn.worker, a.spawn.device); break;
      case pool::Action::Kind::stop: stop_in_background(a.stop.worker, a.stop.by_signal, a.stop.why); break;
      case pool::Action::Kind::drop_model: drops.push_back(a.drop); break;
    }
  }
  changed.notify_all();
  if (drops.empty()) return;
  lock.unlock();
  for (const auto& d : drops) drop_model(d.worker, d.path);
  lock.lock();
}

void WorkerPool::Impl::launch(pool::WorkerId id, pool::DeviceIndex index) {
  auto m = std::make_shared<Member>();
  m->id = id;
  m->device = options.devices.at(index);
  members[id] = m;
  in_background([this, m] {
    std::shared_ptr<detail::WorkerProcess> worker;
    try {
      worker = std::make_shared<detail::WorkerProcess>(options.worker_executable, m->device, options.narrow_workers);
      {
        std::lock_guard lock(mutex);
        m->pid = worker->pid();
        m->visible_devices = worker->visible_devices();
        m->starting = worker;
      }
      detail::LocalStartPlan plan;
      plan.devices = {m->device};
      plan.config = options.config;
      plan.fleet_size = static_cast<int>(options.devices.size());
      plan.ort_library = options.ort_library;
      worker->initialise(plan, options.max_resident_sessions, options.prime_libraries, options.start_timeout_s);
      auto channel = status_channel_to(*worker);  // before it is handed out: a status never waits on its control channel
      // What it holds with no session: the floor its sessions' memory adds to (pool status). Host
      // memory once a CPU worker has handed back what its initialisation freed (the primer's throwaway
      // sessions; a GPU worker keeps what it primed, and its host floor is not taken); GPU memory as
      // NVML sees it.
      std::optional<uint64_t> blank_host;
      std::optional<uint64_t> blank_gpu = uint64_t{0};
      if (m->device.is_gpu()) {
        const auto gpu = detail::Nvml::instance().memory_by_process();
        const auto mine = gpu.find(worker->pid());
        blank_gpu = mine != gpu.end() ? std::optional<uint64_t>(mine->second) : std::nullopt;
      } else {
        try {
          worker->channel().call(detail::message::trim, nullptr, kWorkerRequestTimeoutS);
          blank_host = detail::process_memory(worker->pid()).anonymous_pss_bytes;
        } catch (const Error& e) {
          spdlog::debug("{}: the new worker pid {} did not trim: {}", m->device.to_string(), worker->pid(), e.what());
        }
      }
      std::unique_lock lock(mutex);
      m->blank_gpu_bytes = blank_gpu;
      m->blank_host_anonymous = blank_host;
      m->starting.reset();
      m->status_channel = std::move(channel);
      m->process = std::move(worker);
      m->ready_ms = static_cast<double>(monotonic_ns() - start_ns) / 1e6;
      carry_out(lock, core.worker_up(m->id));
    } catch (const std::exception& e) {
      std::unique_lock lock(mutex);
      m->starting.reset();
      m->error = Error::from(e).at(m->device.to_string());
      carry_out(lock, core.worker_failed(m->id));
      if (core.find(m->id) == nullptr) members.erase(m->id);
    }
  });
}

void WorkerPool::Impl::stop_in_background(pool::WorkerId id, bool by_signal, const std::string& why) {
  const MemberPtr m = member(id);
  if (!m || !m->process) {
    core.stopped(id);
    members.erase(id);
    return;
  }
  spdlog::debug("{}: stopping the worker pid {} ({})", m->device.to_string(), m->pid, why);
  in_background([this, m, by_signal] {
    // Parked: by signal, as it would block in its first CUDA call.
    if (by_signal) m->process->terminate(2);
    else m->process->stop();
    std::lock_guard lock(mutex);
    core.stopped(m->id);
    if (core.find(m->id) == nullptr) members.erase(m->id);
    changed.notify_all();
  });
}

void WorkerPool::Impl::report_death(std::unique_lock<std::mutex>& lock, pool::WorkerId id) {
  const MemberPtr m = member(id);
  carry_out(lock, core.worker_died(id));
  if (core.find(id) == nullptr) members.erase(id);
  if (m && m->process) {
    // Its channel may have closed while its process lives on (stuck in its exit, held stopped): it is
    // ended, never left behind the pool's back.
    in_background([m] { m->process->terminate(0.5); });
  }
}

void WorkerPool::Impl::await_up(std::unique_lock<std::mutex>& lock, pool::WorkerId id, double timeout_s, const char* which) {
  const int64_t deadline = detail::deadline_in(timeout_s, monotonic_ns());
  const auto settled = [&] {
    const pool::Worker* w = core.find(id);
    return w == nullptr || w->phase != pool::Phase::starting;
  };
  if (detail::wait_until(changed, lock, deadline, settled)) return;
  const std::string device = member(id) ? member(id)->device.to_string() : std::string("its device");
  throw Error("the pool's " + std::string(which) + " for " + device + " was not initialised within " + detail::seconds_text(timeout_s),
              "It is still loading ONNX Runtime and the CUDA EP; wait longer (raise the start timeout) or check `ortfleet pool status`", device);
}

// --- what takes time ---------------------------------------------------------------------------------------

void WorkerPool::Impl::restore_if_needed(const MemberPtr& m) {
  // A park of this worker in progress finishes first (park_mutex); the core then says whether the
  // worker is parked still (the park may have failed).
  std::lock_guard parking(m->park_mutex);
  {
    std::lock_guard lock(mutex);
    if (!core.restore_needed(m->id)) return;
  }
  const int64_t start = monotonic_ns();
  try {
    detail::WorkerParking::unpark(*m->process);
  } catch (const Error& e) {
    spdlog::warn("{}: {}; ending that worker (pid {})", m->device.to_string(), e.what(), m->pid);
    std::unique_lock lock(mutex);
    report_death(lock, m->id);
    throw;
  }
  spdlog::info("{}: restored worker pid {} from its checkpoint in {:.0f} ms", m->device.to_string(), m->pid,
               static_cast<double>(monotonic_ns() - start) / 1e6);
  std::lock_guard lock(mutex);
  core.restored(m->id);
  m->parked_status = nullptr;
}

json WorkerPool::Impl::ask_status(Member& m, bool with_plans, double timeout_s) {
  std::lock_guard lock(m.status_mutex);
  if (!m.status_channel || !m.status_channel->alive()) m.status_channel = status_channel_to(*m.process);
  json fields = with_plans ? json{{"with_plans", true}} : json(nullptr);
  return m.status_channel->call(detail::message::status, std::move(fields), timeout_s).body;
}

bool WorkerPool::Impl::holds_jobs_sessions(Member& m) {
  try {
    const json status = ask_status(m, false, kWorkerRequestTimeoutS);
    const json& sessions = status.at("sessions");
    return std::any_of(sessions.begin(), sessions.end(), [](const json& s) { return s.value("holders", 0) > 0; });
  } catch (const std::exception&) {
    return true;
  }
}

bool WorkerPool::Impl::holds_nothing(Member& m) {
  if (!m.process->alive()) return true;
  try {
    return ask_status(m, false, 10).at("sessions").empty();
  } catch (const std::exception&) {
    return true;  // not answering after a failed start: of no use to anyone
  }
}

std::vector<pool::ModelKey> WorkerPool::Impl::move_sessions(Member& from, Member& to, bool& from_empty) {
  from_empty = false;
  std::vector<pool::ModelKey> moved;
  json status;
  try {
    status = ask_status(from, /*with_plans=*/true, kWorkerRequestTimeoutS);
  } catch (const std::exception& e) {
    spdlog::debug("{}: the worker pid {} did not list its sessions: {}", from.device.to_string(), from.pid, e.what());
    return moved;
  }
  for (const auto& s : status.value("sessions", json::array())) {
    if (s.value("holders", 0) > 0 || !s.contains("plan")) continue;
    try {
      // A handed-over worker's plans name files as its job did: read from the job's folder.
      detail::LocalStartPlan plan = detail::with_absolute_paths(detail::plan_from_json(s.at("plan")), from.folder);
      make_resident(to, plan);
      moved.push_back(model_key(plan.model_path));
    } catch (const std::exception& e) {
      // Dropped all the same: its model stays proven, so its next start makes a new session in the shared worker.
      spdlog::warn("{}: {} was not moved into the shared worker ({}); it is dropped, and its next start makes a new session there",
                   from.device.to_string(), s.value("model", ""), Error::from(e).what());
    }
  }
  try {
    from.process->channel().call(detail::message::evict, nullptr, kWorkerRequestTimeoutS);
    from_empty = ask_status(from, false, kWorkerRequestTimeoutS).value("sessions", json::array()).empty();
  } catch (const std::exception& e) {
    spdlog::debug("{}: the worker pid {} did not drop its sessions: {}", from.device.to_string(), from.pid, e.what());
  }
  return moved;
}

void WorkerPool::Impl::make_resident(Member& to, detail::LocalStartPlan plan) {
  detail::WorkerChannel channel(to.process->attach({}, kWorkerRequestTimeoutS), to.device, to.pid, to.process->observer_hooks());
  plan.ort_library = options.ort_library;
  channel.release(channel.start(plan, options.start_timeout_s).session);  // nobody holds it: resident until evicted
}

void WorkerPool::Impl::drop_model(pool::WorkerId id, const std::string& path) {
  MemberPtr m;
  {
    std::lock_guard lock(mutex);
    m = member(id);
    if (!m || !m->process || !core.hold(id)) return;
  }
  try {
    restore_if_needed(m);  // a parked worker frees its sessions' memory in its own CUDA calls
    const size_t dropped = m->process->channel().call(detail::message::evict, {{"model", path}}, kWorkerRequestTimeoutS).body.value("count", size_t{0});
    if (dropped > 0) spdlog::info("{}: {} changed: dropped {} session(s) of its old content (worker pid {})", m->device.to_string(), path, dropped, m->pid);
  } catch (const std::exception& e) {
    spdlog::debug("{}: the worker pid {} did not drop the old sessions of {}: {}", m->device.to_string(), m->pid, path, e.what());
  }
  std::lock_guard lock(mutex);
  core.release(id);
}

bool WorkerPool::Impl::fold_in(pool::WorkerId from) {
  std::unique_lock lock(mutex);
  const pool::FoldStep step = core.fold_begin(from);
  carry_out(lock, step.actions);
  const MemberPtr m = member(from);
  if (step.kind == pool::FoldStep::Kind::none || !m) return false;
  if (step.kind == pool::FoldStep::Kind::promoted) {
    spdlog::info("{}: the worker pid {} holds the proven models now (the shared worker)", m->device.to_string(), m->pid);
    return true;
  }
  const MemberPtr into = member(step.into);
  if (!into) {
    carry_out(lock, core.fold_done(from, step.into, {}, false));
    return false;
  }
  lock.unlock();
  std::vector<pool::ModelKey> moved;
  bool from_empty = false;
  // A job still runs on it: folded in at a later idle spell.
  if (!holds_jobs_sessions(*m)) {
    try {
      restore_if_needed(into);
      restore_if_needed(m);
      moved = move_sessions(*m, *into, from_empty);
    } catch (const Error&) {
      // ended: replaced by keep_up()
    }
  }
  lock.lock();
  carry_out(lock, core.fold_done(from, step.into, moved, from_empty));
  if (from_empty) spdlog::info("{}: moved {} session(s) of the worker pid {} into the shared worker pid {}", m->device.to_string(), moved.size(), m->pid, into->pid);
  const pool::Worker* after = core.find(from);
  return after == nullptr || after->phase == pool::Phase::retiring;
}

ParkOutcome WorkerPool::Impl::park_idle_workers(double lock_timeout_s, const std::function<bool()>& still_idle) {
  auto& s = *this;
  ParkOutcome outcome;
  std::vector<Impl::MemberPtr> workers;
  {
    std::lock_guard lock(s.mutex);
    // A new round: devices restored ahead of a job that did not come may park again.
    for (pool::WorkerId id : s.core.park_round()) {
      if (const auto m = s.member(id); m && m->process) workers.push_back(m);
    }
  }
  std::vector<Impl::MemberPtr> parkable;
  std::vector<json> said;
  for (const auto& m : workers) {
    if (const auto no = detail::WorkerParking::unavailable(m->device)) {
      std::lock_guard lock(s.mutex);
      s.core.park_failed(m->id);  // not tried again until it is used
      m->park_note = *no;
      outcome.kept.push_back(fmt::format("{} (pid {}): {}", m->device.to_string(), m->pid, *no));
      continue;
    }
    try {
      said.push_back(s.ask_status(*m, /*with_plans=*/true, 10));  // the plans: for sessions dropped before parking
      parkable.push_back(m);
    } catch (const std::exception&) {
      // busy or gone: not parked this time
    }
  }
  // Each worker first hands back what no session needs: the checkpoint then holds only the sessions'
  // own memory (arenas shrunk, the C heap's free pages returned).
  std::vector<std::thread> threads;
  for (const auto& m : parkable) {
    threads.emplace_back([m] {
      try {
        const json done = m->process->channel().call(detail::message::trim, nullptr, kWorkerRequestTimeoutS).body;
        spdlog::debug("{}: the worker pid {} trimmed before parking: {}", m->device.to_string(), m->pid, done.dump());
      } catch (const std::exception& e) {
        spdlog::debug("{}: the worker pid {} did not trim before parking: {}", m->device.to_string(), m->pid, e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  std::mutex outcome_mutex;
  const int64_t start = monotonic_ns();
  for (size_t i = 0; i < parkable.size(); ++i) {
    threads.emplace_back([&, i] {
      const auto& m = parkable[i];
      // Decided at the last moment, under the worker's park lock: a job that claimed it since it was
      // chosen (or attached to the pool at all) keeps it unparked; one that claims it from now on
      // restores it first, once this park is over.
      std::lock_guard parking(m->park_mutex);
      if (still_idle && !still_idle()) return;
      {
        std::lock_guard lock(s.mutex);
        if (!s.core.park_begin(m->id)) return;
      }
      try {
        // Large weights go (their entry uploads them again faster than the driver would restore them).
        json kept = s.unload_before_parking(*m, said[i]);
        detail::WorkerParking::park(*m->process, lock_timeout_s);
        std::unique_lock lock(s.mutex);
        m->parked_since_ns = monotonic_ns();
        m->parked_status = std::move(kept);
        m->park_note.clear();
        s.carry_out(lock, s.core.parked(m->id));  // the device's blank spare goes while it stays parked
        std::lock_guard counted(outcome_mutex);
        ++outcome.parked;
      } catch (const Error& e) {
        {
          std::lock_guard lock(s.mutex);
          s.core.park_failed(m->id);
          m->park_note = e.what();
        }
        std::lock_guard counted(outcome_mutex);
        outcome.kept.push_back(fmt::format("{} (pid {}): {}", m->device.to_string(), m->pid, e.what()));
      }
    });
  }
  for (auto& t : threads) t.join();
  outcome.wall_ms = static_cast<double>(monotonic_ns() - start) / 1e6;
  return outcome;
}

}  // namespace ortfleet
