#include "ortfleet/fleet/worker_pool.hpp"

#include <fcntl.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "engine/cache/crash_records.hpp"
#include "engine/cuda/nvml.hpp"
#include "fleet/pool/worker_parking.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "fleet/worker/worker_proof.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "process/process_memory.hpp"

namespace ortfleet {
using nlohmann::json;

namespace {
/// What tells one model file from another for the pool: its path and identity (a changed file is new).
std::string model_identity(const std::string& model) {
  const std::string record = detail::crash_record_path(model, /*make_folder=*/false);
  return record.empty() ? model : record;
}

/// How long `status_json` waits for the workers' own answers: a worker that is busy, stopped or
/// overloaded is shown as it last answered, so that `pool status` answers within a second.
constexpr double kStatusWaitS = 0.8;
/// How long one worker may take to answer a status request on its own channel before that channel is
/// given up (the worker is left alone; the next status attaches a new channel).
constexpr double kStatusTimeoutS = 10;
/// How long a worker may take to answer the small requests the pool sends on its control channel
/// (evict, its sessions) before it is taken as broken.
constexpr double kRequestTimeoutS = 60;
}  // namespace

struct WorkerPool::Impl {
  PoolOptions options;
  std::string executable;
  int64_t start_ns = 0;

  /// One worker process of the pool and what the pool knows of it.
  struct Member {
    PoolWorkerStatus status;
    std::shared_ptr<detail::WorkerProcess> process;  // set once initialised (or adopted)
    std::shared_ptr<detail::WorkerProcess> starting;  // while it initialises: end_workers() ends it too
    std::optional<Error> error;
    std::thread starter;
    /// Starts handed out by worker_for that have not been reported back (start_succeeded/start_failed).
    int starts = 0;
    /// One of them is a model's first start in this pool (its first session and inference): no other
    /// start joins this worker until it is over.
    bool trial = false;
    bool retired = false;  // taken out of its role: a worker still starting is stopped once it is up
    /// Identities of the models whose sessions it holds, as far as the pool knows (its starts, a
    /// job's hand-over); the worker's status says exactly.
    std::set<std::string> models;
    // Status answers, on a channel of their own: a status request never queues behind the control
    // channel's requests and never kills a worker that is slow to answer.
    std::mutex status_mutex;
    std::unique_ptr<detail::WorkerChannel> status_channel;  // status_mutex
    json last_status;                                       // Impl::mutex
    int64_t last_status_ns = 0;                             // Impl::mutex
    bool status_in_flight = false;                          // Impl::mutex

    bool ready() const { return status.state == "ready" && process && process->alive(); }
    /// Nothing of any job runs or stays here: no start in flight, no session it knows of.
    bool blank() const { return starts == 0 && models.empty(); }
  };
  using MemberPtr = std::shared_ptr<Member>;

  /// The workers of one device: a shared worker, and a spare while the shared one holds sessions (a
  /// model new to the pool starts there, never beside the sessions other jobs hold). Extra workers
  /// appear only for a while: a job's own worker handed over with its model, or a second new model
  /// starting while the spare is busy with a first; when the pool is idle, their sessions move into the
  /// shared worker (consolidate) and they end, so that an idle device keeps at most two processes.
  struct DeviceWorkers {
    Device device;
    MemberPtr shared;
    MemberPtr spare;
    std::vector<MemberPtr> extra;

    std::vector<MemberPtr> all() const {
      std::vector<MemberPtr> out;
      if (shared) out.push_back(shared);
      if (spare) out.push_back(spare);
      out.insert(out.end(), extra.begin(), extra.end());
      return out;
    }
    const char* role_of(const Member* m) const { return m == shared.get() ? "shared" : m == spare.get() ? "spare" : "extra"; }
  };

  mutable std::mutex mutex;
  std::condition_variable changed;
  std::vector<DeviceWorkers> devices;
  std::set<std::string> proven;  // model identities that ran in this pool
  std::vector<MemberPtr> retired;  // no longer in a role: stopped in the background, their threads joined at the end
  /// Work on threads of its own (stops of retired workers, status queries), joined once done.
  struct Background {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Background> background;  // mutex

  /// Runs `work` on a thread of its own; threads that have finished are joined first. mutex held.
  void in_background(std::function<void()> work) {
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
  bool stopping = false;
  detail::WorkerParking parking;

  // --- finding workers ------------------------------------------------------------------------------

  DeviceWorkers& of(const Device& d) {
    for (auto& dw : devices) {
      if (dw.device == d) return dw;
    }
    throw Error(d.to_string() + " is not in this worker pool (it has " + to_string(options.devices) + ")",
                "Start the pool with that device too, or use one of its devices", d.to_string());
  }

  /// The member whose process is `process`, and its device's workers; nulls when it is none of ours.
  std::pair<MemberPtr, DeviceWorkers*> find(const detail::WorkerProcess* process) {
    for (auto& dw : devices) {
      for (auto& m : dw.all()) {
        if (m->process.get() == process) return {m, &dw};
      }
    }
    return {nullptr, nullptr};
  }

  std::vector<MemberPtr> all_members() const {
    std::lock_guard lock(mutex);
    std::vector<MemberPtr> out;
    for (const auto& dw : devices) {
      for (auto& m : dw.all()) out.push_back(std::move(m));
    }
    return out;
  }

  // --- starting and ending workers ------------------------------------------------------------------

  detail::LocalStartPlan init_plan(const Device& device) const {
    detail::LocalStartPlan plan;
    plan.devices = {device};
    plan.config = options.config;
    plan.fleet_size = static_cast<int>(options.devices.size());
    plan.ort_library = options.ort_library;
    return plan;
  }

  /// A new member on `device`, spawned and initialised on a thread of its own; its status says how it
  /// went. mutex held.
  MemberPtr launch(const Device& device) {
    auto m = std::make_shared<Member>();
    m->status.device = device;
    m->status.state = "starting";
    m->starter = std::thread([this, m, device] {
      std::shared_ptr<detail::WorkerProcess> worker;
      try {
        worker = std::make_shared<detail::WorkerProcess>(executable, device, options.narrow_workers);
        {
          std::lock_guard lock(mutex);
          m->status.pid = worker->pid();
          m->status.visible_devices = worker->visible_devices();
          m->starting = worker;
        }
        worker->initialise(init_plan(device), options.max_resident_sessions, options.prime_libraries, options.start_timeout_s);
        std::unique_lock lock(mutex);
        m->starting.reset();
        if (m->retired || stopping) {
          m->status.state = "stopped";
          lock.unlock();
          worker->stop();  // nobody wants it any more: it ends before anything was given to it
        } else {
          lock.unlock();
          auto channel = status_channel_to(*worker);  // before it is handed out: a status never waits on its control channel
          lock.lock();
          m->status_channel = std::move(channel);
          m->process = std::move(worker);
          m->status.state = "ready";
          m->status.ready_ms = static_cast<double>(monotonic_ns() - start_ns) / 1e6;
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        m->starting.reset();
        m->error = Error::from(e).at(device.to_string());
        m->status.state = "failed";
        m->status.error = m->error->what();
      }
      changed.notify_all();
    });
    return m;
  }

  /// Waits (holding `lock`) until `m` is initialised or failed; throws when `timeout_s` passes first.
  void await_settled(std::unique_lock<std::mutex>& lock, const MemberPtr& m, double timeout_s, const char* which) {
    const int64_t deadline = detail::deadline_in(timeout_s, monotonic_ns());
    if (detail::wait_until(changed, lock, deadline, [&] { return m->status.state != "starting"; })) return;
    const std::string device = m->status.device.to_string();
    throw Error("the pool's " + std::string(which) + " for " + device + " was not initialised within " + detail::seconds_text(timeout_s),
                "It is still loading ONNX Runtime and the CUDA EP; wait longer (raise the start timeout) or check `ortfleet pool status`",
                device);
  }

  /// Takes `m` out of its role and stops it in the background (parked: by signal, it would block in
  /// its first CUDA call). mutex held.
  void retire(const MemberPtr& m, const char* why) {
    if (!m) return;
    m->retired = true;
    retired.push_back(m);
    if (!m->process) return;  // still starting: its starter ends, and the process goes with the member
    spdlog::debug("{}: stopping the worker pid {} ({})", m->status.device.to_string(), m->process->pid(), why);
    const bool parked = parking.seen(*m->process).parked;
    in_background([this, m, parked] {
      if (parked) m->process->terminate(2);
      else m->process->stop();
      parking.forget(*m->process);
    });
  }

  /// `m`'s process, restored first if it is parked. A worker the driver cannot restore is ended (the
  /// pool replaces it) and the error thrown.
  void restore(const MemberPtr& m) {
    const auto& worker = m->process;
    try {
      parking.unpark(*worker);
    } catch (const Error& e) {
      spdlog::warn("{}: {}; ending that worker (pid {})", worker->device().to_string(), e.what(), worker->pid());
      worker->terminate(0.5);
      parking.forget(*worker);
      throw;
    }
  }

  // --- what a worker says of itself -------------------------------------------------------------------

  /// A channel of its own to `worker` for status requests: one that times out gives up the channel,
  /// never the worker (observer hooks).
  static std::unique_ptr<detail::WorkerChannel> status_channel_to(detail::WorkerProcess& worker) {
    return std::make_unique<detail::WorkerChannel>(worker.attach({}, kRequestTimeoutS), worker.device(), worker.pid(), worker.observer_hooks());
  }

  /// `m`'s status answer on its own channel, within `timeout_s`; throws when it does not answer.
  json ask_status(Member& m, bool with_plans, double timeout_s) {
    std::lock_guard lock(m.status_mutex);
    if (!m.status_channel || !m.status_channel->alive()) m.status_channel = status_channel_to(*m.process);
    json fields = with_plans ? json{{"with_plans", true}} : json(nullptr);
    return m.status_channel->call(detail::message::status, std::move(fields), timeout_s).body;
  }

  /// Whether any job holds a session on `m` (or it does not answer: taken as yes).
  bool holds_jobs_sessions(Member& m) {
    try {
      const json status = ask_status(m, false, kRequestTimeoutS);
      const json& sessions = status.at("sessions");
      return std::any_of(sessions.begin(), sessions.end(), [](const json& s) { return s.value("holders", 0) > 0; });
    } catch (const std::exception&) {
      return true;
    }
  }

  // --- moving proven models into the shared worker ------------------------------------------------------

  /// Makes `to` hold the sessions of `from` that no job holds (each started there from its plan, then
  /// let go, so it stays resident), then drops them from `from`. Returns how many moved; a session that
  /// could not be started on `to` is dropped all the same (its model stays proven: its next start makes
  /// a session on the shared worker). Sessions a job still holds stay where they are.
  size_t move_sessions(Member& from, Member& to) {
    json status;
    try {
      status = ask_status(from, /*with_plans=*/true, kRequestTimeoutS);
    } catch (const std::exception& e) {
      spdlog::debug("{}: the worker pid {} did not list its sessions: {}", from.status.device.to_string(), from.status.pid, e.what());
      return 0;
    }
    size_t moved = 0;
    std::unique_ptr<detail::WorkerChannel> channel;
    for (const auto& s : status.value("sessions", json::array())) {
      if (s.value("holders", 0) > 0 || !s.contains("plan")) continue;
      try {
        if (!channel) {
          channel = std::make_unique<detail::WorkerChannel>(to.process->attach({}, kRequestTimeoutS), to.process->device(), to.process->pid(),
                                                            to.process->observer_hooks());
        }
        detail::LocalStartPlan plan = detail::plan_from_json(s.at("plan"));
        plan.ort_library = options.ort_library;
        channel->start(plan, options.start_timeout_s);
        channel->release(s.value("session", ""));
        std::lock_guard lock(mutex);
        to.models.insert(model_identity(plan.model_path));
        ++moved;
      } catch (const std::exception& e) {
        spdlog::warn("{}: {} was not moved into the shared worker ({}); it is dropped, and its next start makes a new session there",
                     from.status.device.to_string(), s.value("model", ""), Error::from(e).what());
        channel.reset();
      }
    }
    try {
      from.process->channel().call(detail::message::evict, nullptr, kRequestTimeoutS);
      const bool empty = ask_status(from, false, kRequestTimeoutS).value("sessions", json::array()).empty();
      std::lock_guard lock(mutex);
      if (empty) from.models.clear();
    } catch (const std::exception& e) {
      spdlog::debug("{}: the worker pid {} did not drop its sessions: {}", from.status.device.to_string(), from.status.pid, e.what());
    }
    return moved;
  }

  /// `m` (a spare or an extra worker of `dw`, holding sessions a job no longer holds) folded in: it
  /// becomes the shared worker when that one holds nothing, else its sessions move there. Then it is
  /// the spare, or ends when there is one. mutex not held.
  void fold_in(DeviceWorkers& dw, const MemberPtr& m) {
    MemberPtr shared;
    {
      std::lock_guard lock(mutex);
      shared = dw.shared;
      if (!m->ready() || m->starts > 0 || !shared || !shared->ready() || shared->starts > 0) return;
      if (shared->blank()) {
        promote(dw, m);
        return;
      }
    }
    if (holds_jobs_sessions(*m)) return;  // a job still runs on it: folded in at a later idle spell
    try {
      restore(shared);
      restore(m);
    } catch (const Error&) {
      return;  // ended: replaced by keep_up()
    }
    const size_t moved = move_sessions(*m, *shared);
    std::lock_guard lock(mutex);
    if (!m->blank()) return;
    spdlog::info("{}: moved {} session(s) of the worker pid {} into the shared worker pid {}", dw.device.to_string(), moved, m->status.pid,
                 shared->status.pid);
    make_spare_or_retire(dw, m);
  }

  /// `m` becomes `dw`'s shared worker; the shared worker it replaces (holding nothing) becomes the spare,
  /// or ends when the device has one. mutex held.
  void promote(DeviceWorkers& dw, const MemberPtr& m) {
    MemberPtr old = dw.shared;
    if (dw.spare == m) dw.spare.reset();
    dw.extra.erase(std::remove(dw.extra.begin(), dw.extra.end(), m), dw.extra.end());
    dw.shared = m;
    spdlog::info("{}: the worker pid {} holds the proven models now (the shared worker)", dw.device.to_string(), m->status.pid);
    if (old && old != m) make_spare_or_retire(dw, old);
  }

  /// `m`, holding nothing, is `dw`'s spare unless it has one (or needs none): then it ends. mutex held.
  void make_spare_or_retire(DeviceWorkers& dw, const MemberPtr& m) {
    if (dw.spare == m) return;
    dw.extra.erase(std::remove(dw.extra.begin(), dw.extra.end(), m), dw.extra.end());
    if (!dw.spare && options.isolate_new_models && !stopping) {
      dw.spare = m;
      return;
    }
    retire(m, "the device has its two workers");
  }

  /// Claims `m` for a start (a model's first, with `trial`). mutex held.
  static MemberPtr claim(const MemberPtr& m, bool trial) {
    ++m->starts;
    m->trial = m->trial || trial;
    return m;
  }

  /// Where a start of a proven model goes: where its sessions are resident, else the shared worker; but
  /// never beside a model's first start (the spare takes it then). mutex held via `lock`.
  /// The worker of `dw` that is up and holds `identity`'s sessions, claimed for a start; null when none.
  /// mutex held.
  MemberPtr resident_home(DeviceWorkers& dw, const std::string& identity) {
    for (const auto& m : dw.all()) {
      if (m->ready() && !m->trial && m->models.count(identity) != 0) return claim(m, false);
    }
    return nullptr;
  }

  MemberPtr home_for(std::unique_lock<std::mutex>& lock, DeviceWorkers& dw, const std::string& identity, double timeout_s) {
    if (auto home = resident_home(dw, identity)) return home;
    if (!dw.shared->trial || !options.isolate_new_models) return claim(dw.shared, false);
    if (!dw.spare && !stopping) dw.spare = launch(dw.device);
    if (dw.spare) await_settled(lock, dw.spare, timeout_s, "spare worker");
    if (dw.spare && dw.spare->ready() && !dw.spare->trial) return claim(dw.spare, false);
    return claim(dw.shared, false);  // no spare to be had: beside the first start after all
  }

  /// A worker where a model new to the pool may make its first session and run its first inference:
  /// one where no other job's session lives and no other start runs, so that a crash inside ONNX
  /// Runtime there ends nothing of anyone else's. The shared worker while it holds nothing, else the
  /// spare (no job holding a session there), else an extra worker of its own.
  MemberPtr trial_worker(const Device& device, double timeout_s) {
    std::unique_lock lock(mutex);
    auto& dw = of(device);
    if (dw.shared->ready() && dw.shared->blank()) return claim(dw.shared, true);
    if (!dw.spare && !stopping) dw.spare = launch(device);
    if (dw.spare) {
      const MemberPtr spare = dw.spare;
      await_settled(lock, spare, timeout_s, "spare worker");
      if (spare->ready() && spare->starts == 0) {
        claim(spare, true);
        const bool holds_sessions = !spare->models.empty();
        lock.unlock();
        if (!holds_sessions || !holds_jobs_sessions(*spare)) return spare;
        lock.lock();
        --spare->starts;
        spare->trial = false;
      }
    }
    if (stopping) throw Error("the pool is stopping", "Start again once it has been restarted", device.to_string());
    const MemberPtr extra = launch(device);
    dw.extra.push_back(extra);
    await_settled(lock, extra, timeout_s, "extra worker");
    if (extra->ready()) return claim(extra, true);
    spdlog::warn("{}: no worker of its own could be started for a new model ({}): it starts in the shared worker, unisolated",
                 device.to_string(), extra->error ? extra->error->what() : "it stopped");
    dw.extra.erase(std::remove(dw.extra.begin(), dw.extra.end(), extra), dw.extra.end());
    retired.push_back(extra);
    return claim(dw.shared, false);
  }
};

WorkerPool::WorkerPool(PoolOptions options) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  if (options.devices.empty()) options.devices = select_devices("all").devices;
  check_cpu_devices_fit(options.devices);  // a pool never holds more CPU workers than the machine has cores
  if (!(options.start_timeout_s > 0)) throw Error("the pool's start timeout must be a positive number of seconds", "Give e.g. 600");
  // Decided once, here, for every worker of the pool and what it makes later (options() says them).
  const detail::WorkerRuntime runtime = detail::resolve_worker_runtime(options.worker_executable, options.ort_library);
  options.ort_library = runtime.ort_library;
  options.worker_executable = runtime.executable;
  s.executable = options.worker_executable;
  s.options = std::move(options);
  s.start_ns = monotonic_ns();
  std::lock_guard lock(s.mutex);
  // NVML, for `pool status`'s GPU memory per worker, is loaded off the path of any request (its first
  // initialisation takes up to a second on a node of several GPUs).
  s.in_background([] { detail::Nvml::instance(); });
  // One worker per device to start with: while it holds nothing, a model new to the pool may start
  // in it (there is nobody's session to protect); a spare comes once it holds sessions (keep_up).
  for (const auto& d : s.options.devices) {
    Impl::DeviceWorkers dw;
    dw.device = d;
    dw.shared = s.launch(d);
    s.devices.push_back(std::move(dw));
  }
}

WorkerPool::~WorkerPool() {
  auto& s = *impl_;
  std::vector<Impl::MemberPtr> members;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
    for (const auto& dw : s.devices) {
      for (auto& m : dw.all()) members.push_back(std::move(m));
    }
  }
  // A worker still starting (loading the runtime, priming: seconds on a GPU) is ended rather than
  // waited for: nothing was given to it yet. Retired ones too (their starter stops them otherwise).
  std::vector<std::thread> ends;
  {
    std::lock_guard lock(s.mutex);
    for (const auto* list : {&members, &s.retired}) {
      for (const auto& m : *list) {
        if (auto w = m->starting) ends.emplace_back([w] { w->terminate(2); });
      }
    }
  }
  for (auto& t : ends) t.join();
  for (auto& m : members) {
    if (m->starter.joinable()) m->starter.join();
  }
  // Stopped in parallel: each gives its worker time to free its GPU memory. A parked worker holds no
  // GPU memory and would block in its first CUDA call: it is ended by signal.
  std::vector<std::thread> stops;
  for (auto& m : members) {
    if (!m->process) continue;
    stops.emplace_back([&s, m] {
      if (s.parking.seen(*m->process).parked) m->process->terminate(2);
      else m->process->stop();
    });
  }
  for (auto& t : stops) t.join();
  std::list<Impl::Background> background;
  std::vector<Impl::MemberPtr> retired;
  {
    std::lock_guard lock(s.mutex);
    background.swap(s.background);
    retired.swap(s.retired);
  }
  for (auto& b : background) b.thread.join();
  for (auto& m : retired) {
    if (m->starter.joinable()) m->starter.join();
  }
}

void WorkerPool::end_workers(double grace_s) {
  auto& s = *impl_;
  std::vector<std::shared_ptr<detail::WorkerProcess>> workers;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
    std::vector<Impl::MemberPtr> members = s.retired;
    for (const auto& dw : s.devices) {
      for (auto& m : dw.all()) members.push_back(std::move(m));
    }
    for (const auto& m : members) {
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
  const auto settled = [&] {
    return std::none_of(s.devices.begin(), s.devices.end(), [](const Impl::DeviceWorkers& dw) { return dw.shared->status.state == "starting"; });
  };
  if (!detail::wait_until(s.changed, lock, deadline, settled)) return false;
  return std::all_of(s.devices.begin(), s.devices.end(), [](const Impl::DeviceWorkers& dw) { return dw.shared->status.state == "ready"; });
}

const std::vector<Device>& WorkerPool::devices() const { return impl_->options.devices; }
const PoolOptions& WorkerPool::options() const { return impl_->options; }

std::vector<PoolWorkerStatus> WorkerPool::status() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<PoolWorkerStatus> out;
  for (const auto& dw : impl_->devices) out.push_back(dw.shared->status);
  return out;
}

std::string WorkerPool::status_json() const {
  auto& s = *impl_;
  struct Row {
    json entry;
    Impl::MemberPtr member;
  };
  std::vector<Row> rows;
  {
    std::lock_guard lock(s.mutex);
    for (const auto& dw : s.devices) {
      for (const auto& m : dw.all()) {
        const PoolWorkerStatus& st = m->status;
        rows.push_back({json{{"device", st.device.to_string()}, {"role", dw.role_of(m.get())}, {"state", st.state}, {"pid", st.pid},
                             {"error", st.error}, {"visible_devices", st.visible_devices}, {"ready_ms", st.ready_ms}, {"restarts", st.restarts},
                             {"sessions", json::array()}, {"parked", false}},
                        m});
      }
    }
  }
  // Every ready worker is asked at once, each on its own status channel; what has not answered within
  // kStatusWaitS is shown as it last answered.
  const int64_t asked_ns = monotonic_ns();
  for (auto& row : rows) {
    Impl::MemberPtr m = row.member;
    if (!m->ready() || s.parking.seen(*m->process).parked) continue;
    std::lock_guard lock(s.mutex);
    if (m->status_in_flight || s.stopping) continue;
    m->status_in_flight = true;
    s.in_background([&s, m] {
      json answer;
      try {
        answer = s.ask_status(*m, false, kStatusTimeoutS);
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
  for (auto& [d, m] : rows) {
    if (m->process && m->process->alive()) {
      ++workers;
      const int pid = m->process->pid();
      const auto seen = s.parking.seen(*m->process);
      const detail::ProcessMemory host = detail::process_memory(pid);
      d["parked"] = seen.parked;
      d["park_note"] = seen.note;
      d["host_pss_bytes"] = host.pss_bytes;
      d["host_rss_bytes"] = host.rss_bytes;
      total_pss += host.pss_bytes;
      const auto gpu = gpu_memory.find(pid);
      // NVML lists the processes that hold GPU memory, in the driver's pid namespace: a GPU worker it
      // does not list holds none (parked) or cannot be told apart (a container's own pid namespace).
      if (m->status.device.is_gpu()) {
        const bool known = gpu != gpu_memory.end() || seen.parked || (!gpu_memory.empty() && detail::Nvml::instance().ok());
        d["gpu_memory_bytes"] = known ? json(gpu != gpu_memory.end() ? gpu->second : 0) : json(nullptr);
        if (gpu != gpu_memory.end()) total_gpu += gpu->second;
      } else {
        d["gpu_memory_bytes"] = 0;
      }
      if (seen.parked) d["parked_s"] = seen.parked_s;
      std::lock_guard lock(s.mutex);
      const json& said = seen.parked && m->last_status.is_null() ? seen.status : m->last_status;
      if (said.contains("sessions")) d["sessions"] = said.at("sessions");
      if (said.contains("max_resident_sessions")) d["max_resident_sessions"] = said.at("max_resident_sessions");
      if (said.contains("error") && !seen.parked) d["error"] = said.at("error");
      if (!seen.parked && m->status_in_flight) {
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

void WorkerPool::start_failed(const std::shared_ptr<detail::WorkerProcess>& worker, const std::string& model, const Device& device) {
  auto& s = *impl_;
  Impl::MemberPtr m;
  Impl::DeviceWorkers* dw = nullptr;
  {
    std::lock_guard lock(s.mutex);
    std::tie(m, dw) = s.find(worker.get());
    if (!m) return;
    m->starts = std::max(0, m->starts - 1);
    m->trial = false;
    s.changed.notify_all();
    if (m == dw->shared) return;  // the shared worker stays; dead, keep_up() replaces it
  }
  bool holds_nothing = !worker->alive();
  if (!holds_nothing) {
    try {
      holds_nothing = s.ask_status(*m, false, 10).at("sessions").empty();
    } catch (const std::exception&) {
      holds_nothing = true;  // not answering after a failed start: of no use to anyone
    }
  }
  std::lock_guard lock(s.mutex);
  if (!holds_nothing || m->starts > 0) return;
  m->models.clear();
  if (m == dw->spare && worker->alive()) return;  // blank again: still the spare
  spdlog::info("{}: the worker (pid {}) that failed to start {} holds nothing: stopping it", device.to_string(), worker->pid(), model);
  if (m == dw->spare) dw->spare.reset();
  dw->extra.erase(std::remove(dw->extra.begin(), dw->extra.end(), m), dw->extra.end());
  s.retire(m, "its start failed");
}

void WorkerPool::start_succeeded(const std::shared_ptr<detail::WorkerProcess>& worker, const std::string& model) {
  auto& s = *impl_;
  std::lock_guard lock(s.mutex);
  auto [m, dw] = s.find(worker.get());
  const std::string identity = model_identity(model);
  s.proven.insert(identity);
  if (!m) return;
  m->starts = std::max(0, m->starts - 1);
  m->trial = false;
  m->models.insert(identity);
  // A new model proved itself on the spare or an extra worker while the shared worker holds nothing:
  // that worker becomes the shared one at once, no session moved.
  if (m != dw->shared && dw->shared && dw->shared->ready() && dw->shared->blank()) s.promote(*dw, m);
  s.changed.notify_all();
}

size_t WorkerPool::evict() {
  auto& s = *impl_;
  size_t dropped = 0;
  for (const auto& m : s.all_members()) {
    if (!m->ready()) continue;
    try {
      s.restore(m);  // a parked worker frees its sessions' memory in its own CUDA calls
      dropped += m->process->channel().call(detail::message::evict, nullptr, kRequestTimeoutS).body.value("count", size_t{0});
      const bool empty = s.ask_status(*m, false, 10).value("sessions", json::array()).empty();
      std::lock_guard lock(s.mutex);
      if (empty) m->models.clear();
    } catch (const std::exception& e) {
      spdlog::debug("the worker pid {} did not drop its sessions: {}", m->status.pid, e.what());
    }
  }
  keep_up();  // workers that now hold nothing beyond a device's one are stopped
  return dropped;
}

std::shared_ptr<detail::WorkerProcess> WorkerPool::worker_for(const Device& device, const std::string& model, double timeout_s) {
  auto& s = *impl_;
  if (const auto crash = detail::known_crash(model)) {
    throw Error(model + " crashed ONNX Runtime on this machine before, so the pool refuses it until the model file changes (" + *crash + ")",
                "Find the node that crashes: ortfleet doctor " + model + " --locate-crash --device " + device.to_string(), device.to_string());
  }
  const std::string identity = model_identity(model);
  for (int attempt = 0;; ++attempt) {
    keep_up();
    Impl::MemberPtr chosen;
    {
      std::unique_lock lock(s.mutex);
      auto& dw = s.of(device);
      const bool proven = s.proven.count(identity) != 0;
      // A model resident in a worker that is up is handed out there at once: never behind a shared
      // worker still starting (the pool a job leaves starts its own while the job's workers come over).
      if (proven) chosen = s.resident_home(dw, identity);
    }
    if (!chosen) {
      std::unique_lock lock(s.mutex);
      auto& dw = s.of(device);
      s.await_settled(lock, dw.shared, timeout_s, "worker");
      if (dw.shared->status.state == "failed") {
        throw Error("the pool's worker for " + device.to_string() + " failed: " + dw.shared->error->what_failed(), dw.shared->error->hint(),
                    device.to_string());
      }
      if (s.proven.count(identity) != 0 || !s.options.isolate_new_models) chosen = s.home_for(lock, dw, identity, timeout_s);
    }
    if (!chosen) chosen = s.trial_worker(device, timeout_s);
    try {
      s.restore(chosen);
      return chosen->process;
    } catch (const Error&) {
      std::lock_guard lock(s.mutex);
      chosen->starts = std::max(0, chosen->starts - 1);
      chosen->trial = false;
      if (attempt > 0) throw;  // a new worker is started in its place once
    }
  }
}

int WorkerPool::keep_up() {
  auto& s = *impl_;
  int restarted = 0;
  std::lock_guard lock(s.mutex);
  if (s.stopping) return 0;
  for (auto& dw : s.devices) {
    const auto dead = [](const Impl::MemberPtr& m) {
      if (!m || m->status.state != "ready" || !m->process) return false;
      return !m->process->exited().empty() || !m->process->alive();
    };
    if (dead(dw.shared)) {
      // Its sessions are gone with it (its clients have had their error). A spare that holds nothing
      // takes its place at once; else a new worker starts.
      const Impl::MemberPtr gone = dw.shared;
      spdlog::warn("the worker for {} (pid {}) {}; {}", dw.device.to_string(), gone->status.pid,
                   gone->process->exited().empty() ? "stopped answering" : gone->process->exited(),
                   dw.spare && dw.spare->ready() && dw.spare->blank() ? "its spare takes its place" : "starting a new one");
      s.retired.push_back(gone);
      if (dw.spare && dw.spare->ready() && dw.spare->blank()) {
        dw.shared = dw.spare;
        dw.spare.reset();
      } else {
        dw.shared = s.launch(dw.device);
      }
      dw.shared->status.restarts = gone->status.restarts + 1;
      ++restarted;
    }
    if (dead(dw.spare)) {
      s.retired.push_back(dw.spare);
      dw.spare.reset();
    }
    for (auto it = dw.extra.begin(); it != dw.extra.end();) {
      if (dead(*it)) {
        s.retired.push_back(*it);
        it = dw.extra.erase(it);
      } else {
        ++it;
      }
    }
    // A spare while the shared worker holds sessions (a new model's first start must not go beside
    // them); none while it holds nothing (it can take a new model itself).
    if (s.options.isolate_new_models && !dw.spare && !dw.shared->models.empty() && dw.shared->status.state == "ready") {
      dw.spare = s.launch(dw.device);
    } else if (dw.spare && dw.spare->ready() && dw.spare->blank() && dw.shared->ready() && dw.shared->blank()) {
      s.retire(dw.spare, "the shared worker holds nothing: one blank worker is enough");
      dw.spare.reset();
    }
  }
  return restarted;
}

size_t WorkerPool::consolidate() {
  auto& s = *impl_;
  size_t folded = 0;
  for (auto& dw : s.devices) {
    std::vector<Impl::MemberPtr> candidates;
    {
      std::lock_guard lock(s.mutex);
      if (s.stopping) return folded;
      if (dw.spare && !dw.spare->models.empty()) candidates.push_back(dw.spare);
      candidates.insert(candidates.end(), dw.extra.begin(), dw.extra.end());
    }
    for (const auto& m : candidates) {
      s.fold_in(dw, m);
      std::lock_guard lock(s.mutex);
      if (m != dw.spare && std::find(dw.extra.begin(), dw.extra.end(), m) == dw.extra.end()) ++folded;
    }
  }
  keep_up();
  return folded;
}

void WorkerPool::adopt(detail::AdoptedWorker adopted, const std::string& model, int log_fd) {
  auto& s = *impl_;
  const Device device = adopted.device;
  {
    std::lock_guard lock(s.mutex);
    s.of(device);  // a device of this pool, or refused
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
  auto m = std::make_shared<Impl::Member>();
  m->status.device = device;
  m->status.state = "ready";
  m->status.pid = worker->pid();
  m->status.visible_devices = worker->visible_devices();
  try {
    m->status_channel = Impl::status_channel_to(*worker);
  } catch (const Error& e) {
    spdlog::debug("{}: no status channel to the handed-over worker yet ({}): the first status makes one", device.to_string(), e.what());
  }
  m->process = std::move(worker);
  const std::string identity = model_identity(model);
  m->models.insert(identity);
  std::lock_guard lock(s.mutex);
  s.proven.insert(identity);  // it ran in the job that handed it over
  auto& dw = s.of(device);
  // Where the shared worker holds nothing, the job's worker takes its place, model loaded; else it waits
  // as an extra worker until its sessions move into the shared one (consolidate, when the pool is idle).
  if (dw.shared->blank() && dw.shared->status.state != "failed") s.promote(dw, m);  // ready or still starting
  else dw.extra.push_back(m);
  spdlog::info("{}: took over the job's worker (pid {}) with {} loaded", device.to_string(), m->status.pid, model);
}

ParkOutcome WorkerPool::park_workers(double lock_timeout_s) {
  auto& s = *impl_;
  std::vector<std::shared_ptr<detail::WorkerProcess>> workers;
  std::vector<json> statuses;
  for (const auto& m : s.all_members()) {
    if (!m->ready()) continue;
    const auto seen = s.parking.seen(*m->process);
    if (seen.parked || seen.refused) continue;
    json said;
    try {
      said = s.ask_status(*m, false, 10);
    } catch (const std::exception&) {
      continue;  // busy or gone: not parked this time
    }
    workers.push_back(m->process);
    statuses.push_back(std::move(said));
  }
  // Each worker first hands back what no session needs: the checkpoint then holds only the sessions'
  // own memory (arenas shrunk, the C heap's free pages returned).
  std::vector<std::thread> trims;
  for (const auto& w : workers) {
    if (detail::WorkerParking::unavailable(w->device())) continue;  // it will not park: nothing to trim for
    trims.emplace_back([w] {
      try {
        const json done = w->channel().call(detail::message::trim, nullptr, kRequestTimeoutS).body;
        spdlog::debug("{}: the worker pid {} trimmed before parking: {}", w->device().to_string(), w->pid(), done.dump());
      } catch (const std::exception& e) {
        spdlog::debug("{}: the worker pid {} did not trim before parking: {}", w->device().to_string(), w->pid(), e.what());
      }
    });
  }
  for (auto& t : trims) t.join();
  const auto done = s.parking.park(workers, statuses, lock_timeout_s);
  return ParkOutcome{done.parked, done.kept, done.wall_ms};
}

}  // namespace ortfleet
