#include "ortfleet/fleet/fleet.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <condition_variable>
#include <future>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/environment.hpp"
#include "base/system_paths.hpp"
#include "engine/cache/crash_records.hpp"
#include "engine/providers/provider_registry.hpp"
#include "fleet/worker/cache_fill.hpp"
#include "fleet/local/local_start.hpp"
#include "fleet/pool/pool_daemon.hpp"
#include "fleet/pool/pool_client.hpp"
#include "fleet/pool/pool_start.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "ortfleet/fleet/start_record.hpp"
#include "ortfleet/fleet/worker_pool.hpp"
#include "process/ipc.hpp"

namespace ortfleet {

std::string to_string(Strategy s) {
  switch (s) {
    case Strategy::sequential: return "sequential";
    case Strategy::threads: return "threads";
    case Strategy::processes: return "processes";
    case Strategy::fleet: return "fleet";
    case Strategy::automatic: return "auto";
  }
  return "?";
}

Strategy parse_strategy(const std::string& s) {
  for (Strategy v : {Strategy::sequential, Strategy::threads, Strategy::processes, Strategy::fleet, Strategy::automatic}) {
    if (s == to_string(v)) return v;
  }
  throw Error("unknown strategy '" + s + "'", "Use sequential, threads, processes, fleet or auto");
}

namespace {
constexpr std::array<std::pair<StrategyWhy, const char*>, 11> kStrategyWhyNames = {{
    {StrategyWhy::as_asked, "as_asked"},
    {StrategyWhy::on_pool, "on_pool"},
    {StrategyWhy::one_process_asked, "one_process_asked"},
    {StrategyWhy::pool_answered, "pool_answered"},
    {StrategyWhy::leaves_pool, "leaves_pool"},
    {StrategyWhy::cpu, "cpu"},
    {StrategyWhy::record_one_process, "record_one_process"},
    {StrategyWhy::record_workers, "record_workers"},
    {StrategyWhy::one_gpu, "one_gpu"},
    {StrategyWhy::several_gpus, "several_gpus"},
    {StrategyWhy::known_crash, "known_crash"},
}};
}  // namespace

const char* to_string(StrategyWhy why) {
  for (const auto& [w, name] : kStrategyWhyNames) {
    if (w == why) return name;
  }
  return "?";
}

StrategyWhy parse_strategy_why(const std::string& name) {
  for (const auto& [why, n] : kStrategyWhyNames) {
    if (name == n) return why;
  }
  throw Error("unknown strategy reason '" + name + "'");
}

const std::vector<Strategy>& all_strategies() {
  static const std::vector<Strategy> all = {Strategy::sequential, Strategy::threads, Strategy::processes, Strategy::fleet};
  return all;
}

struct Fleet::Impl {
  /// The process that made the fleet. A child forked from it holds a copy of its memory but none of its
  /// threads (a lock one of them held stays held), and its sessions and workers are the parent's: the
  /// copy is refused, and at its end let go of without a word, never shut down (that would stop the
  /// parent's workers, and join threads the child does not have: a forked child hung for two hours, or
  /// aborted, as it exited; issue 58's audit).
  const pid_t made_in = ::getpid();
  bool forked_copy() const { return ::getpid() != made_in; }
  void refuse_forked_copy() const {
    if (!forked_copy()) return;
    throw Error("this Fleet was made in process " + std::to_string(made_in) + ", and this process (" + std::to_string(::getpid()) +
                    ") is a child forked from it: the fleet's sessions and workers are the parent's",
                "Make a new Fleet in the child (or start children with multiprocessing's 'spawn' or 'forkserver' method)");
  }
  std::string model;
  FleetOptions options;
  Strategy strategy = Strategy::fleet;
  bool use_workers = false;
  std::string devices_reason;  // select_devices("all")'s, when the fleet chose its devices
  /// Why auto passed over the node's warm pool.
  struct PoolPassedOver {
    enum class Why { lacks_devices, other_runtime, unusable, none_left } why;
    std::string socket;
    std::string detail;  ///< the devices it lacks, why the socket is unusable, why no pool is left
    std::string words() const;
  };
  /// What auto went by, typed, with the measurements its words quote (strategy_reason()).
  struct AutoChoice {
    StrategyWhy why = StrategyWhy::as_asked;
    long gpus = 0;
    std::string pool_socket;  ///< pool_answered: the pool's socket
    std::string devices;      ///< pool_answered: the devices it serves
    std::optional<PoolPassedOver> passed_over;
    std::string record;       ///< record_*: the record, described
    StartWay faster = StartWay::workers;
    StartWay slower = StartWay::workers;
    double faster_ms = 0;
    double slower_ms = 0;
    std::string crash;        ///< known_crash: the crash record's line
    std::string words() const;
  };
  AutoChoice auto_choice;
  /// Strategy::automatic, from what is measured: may point options.pool_socket at a live pool server
  /// or set options.one_process.
  AutoChoice choose_automatically(long gpus);

  mutable std::mutex mutex;
  std::condition_variable changed;
  Timeline timeline;
  int64_t start_ns = 0;
  std::vector<DeviceStatus> status;
  struct Failure {
    Error error;       // as the device's start, run or worker said it
    bool after_ready;  // it failed while running (its worker died or hung), not while starting
  };
  std::vector<std::optional<Failure>> failures;
  std::vector<detail::LocalDeviceResult> local;  // in-process sessions
  /// Or a session in a worker process, reached through a channel to it.
  struct Remote {
    std::shared_ptr<detail::WorkerProcess> process;  // its own worker, or the pool's (kept alive while in use)
    std::unique_ptr<detail::WorkerChannel> attached;  // a channel of its own to a pool's worker
    std::string session;
    detail::WorkerChannel* channel() const { return attached ? attached.get() : &process->channel(); }
  };
  std::vector<Remote> remotes;

  /// Where a run on `device` goes, once the device is ready (waiting while it starts); throws why not.
  struct Target {
    Session* session = nullptr;
    detail::WorkerChannel* worker = nullptr;
    std::string remote_session;
  };
  Target ready_target(const Device& device);
  /// `call` on a worker: an error that leaves the worker gone marks the device failed.
  template <class Call>
  auto on_worker(const Device& device, detail::WorkerChannel& worker, Call call) -> decltype(call());
  std::unique_ptr<detail::MessageChannel> pool_connection;  // to the `ortfleet serve` daemon
  /// Auto found no pool on the default socket and will leave one there: its sessions start in workers
  /// of its own (even on one device), which it hands over to that pool as it ends.
  bool leaves_pool = false;
  std::string left_pool_socket;  // the pool it left, once it listens
  /// Decided once for the whole fleet, on first need, and read by everything after: the worker
  /// executable its workers (and what it leaves behind) run and the ONNX Runtime they load (the one this
  /// process would); and the idle and park times of the warm pool it leaves (the config's, else the
  /// environment's). Each keeps the error that deciding it threw, for whoever needs it to say.
  struct WorkerChoice {
    std::string executable;
    std::string ort_library;
    std::optional<Error> error;  // no worker executable
  };
  const WorkerChoice& worker_choice();
  std::once_flag worker_chosen;
  WorkerChoice worker_choice_;
  struct PoolTimes {
    std::optional<double> idle_exit_s;  // nothing: the pool's default
    double park_after_s = 0;
    std::optional<Error> idle_error;  // a setting that is not a number of seconds
    std::optional<Error> park_error;
  };
  const PoolTimes& pool_times();
  std::once_flag pool_times_chosen;
  PoolTimes pool_times_;
  std::unique_ptr<detail::BackgroundFill> cache_fill;  // the entry a cold start missed, made after ready
  std::vector<LeftBehind> left_behind;                  // what runs on after ready
  /// Once every device is done: what a cold start leaves for later starts, never on the path to ready.
  void after_ready();
  bool after_ready_done = false;  // left_behind is complete
  /// The fleet's own workers while they start (run_workers): shutdown() stops them.
  std::vector<std::weak_ptr<detail::WorkerProcess>> starting_workers;
  bool start_cancelled = false;  // shut down before every device was done: nothing is left behind
  /// shutdown() before every device is done: the fleet's own starting workers are stopped, so the
  /// coordinator ends at once (sessions starting in this process or on a pool are waited for).
  void cancel_start();
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::thread coordinator;
  bool started = false;
  bool shut_down = false;

  size_t index_of(const Device& d) const {
    for (size_t i = 0; i < options.devices.size(); ++i) {
      if (options.devices[i] == d) return i;
    }
    throw Error("device " + d.to_string() + " is not part of this fleet; it has: " + to_string(options.devices),
                "Use one of the devices the fleet was started on");
  }

  void mark_starting(size_t i) {
    std::lock_guard lock(mutex);
    status[i].state = DeviceState::starting;
    changed.notify_all();
  }

  void mark_failed(size_t i, const Error& error, bool after_ready = false) {
    std::lock_guard lock(mutex);
    mark_failed_locked(i, error, after_ready);
  }

  void mark_failed_locked(size_t i, const Error& error, bool after_ready) {
    status[i].state = DeviceState::failed;
    status[i].error = error.what();
    failures[i] = Failure{error, after_ready};
    changed.notify_all();
  }

  /// A worker that died or was given up on with runs in flight: those runs found out on threads of
  /// their own (the ring's or run_async's), so its device has failed though nobody has called since.
  /// Asked whenever the devices' states are read; `mutex` held.
  void note_gone_workers() {
    if (!use_workers) return;
    for (size_t i = 0; i < status.size(); ++i) {
      if (status[i].state != DeviceState::ready) continue;  // ready: its remote is in place
      if (auto error = remotes[i].channel()->gone_error()) mark_failed_locked(i, *error, /*after_ready=*/true);
    }
  }

  /// Whether the sessions start on a worker pool, in this process or an `ortfleet serve` daemon.
  bool on_pool() const { return options.pool != nullptr || !options.pool_socket.empty(); }

  bool all_done() const {
    return std::all_of(status.begin(), status.end(),
                       [](const DeviceStatus& d) { return d.state != DeviceState::pending && d.state != DeviceState::starting; });
  }

  template <class Done>
  bool wait_until(std::unique_lock<std::mutex>& lock, int64_t deadline_ns, Done done) {
    return detail::wait_until(changed, lock, deadline_ns, done);
  }

  /// The one place a device becomes ready, wherever its session lives.
  void mark_ready(size_t i, DeviceStatus ready, const std::vector<TensorSpec>& model_inputs, const std::vector<TensorSpec>& model_outputs) {
    std::lock_guard lock(mutex);
    ready.ready_ms = static_cast<double>(ready.ready_ns - start_ns) / 1e6;
    status[i] = std::move(ready);
    if (inputs.empty()) {
      inputs = model_inputs;
      outputs = model_outputs;
    }
    changed.notify_all();
  }

  detail::LocalStartPlan plan_for(std::vector<Device> devices, detail::LocalMode mode) const {
    detail::LocalStartPlan plan;
    plan.model_path = model;
    plan.devices = std::move(devices);
    plan.config = options.config;
    plan.mode = mode;
    plan.warmup_runs = options.warmup_runs;
    plan.dynamic_dim = options.dynamic_dim;
    plan.fleet_size = static_cast<int>(options.devices.size());
    plan.ort_library = options.ort_library;
    plan.cache_dir = options.cache_dir;
    plan.profile_dir = options.profile_dir;
    return plan;
  }

  void run_local(detail::LocalMode mode) {
    for (size_t i = 0; i < status.size(); ++i) mark_starting(i);
    // The sessions land in `local` in place: run() may use a device as soon as it is marked ready,
    // while the others are still starting.
    detail::start_locally(plan_for(options.devices, mode), timeline, local, [&](size_t i) {
      const auto& r = local[i];
      if (r.session) mark_ready(i, detail::ready_status(r), r.session->inputs(), r.session->outputs());
      else mark_failed(i, *r.error);
    });
  }

  /// Runs `start_device(i)` for every device on a thread of its own; a throw fails that device only.
  template <class StartDevice>
  void for_each_device(StartDevice start_device) {
    remotes.resize(options.devices.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < options.devices.size(); ++i) {
      mark_starting(i);
      threads.emplace_back([&, i] {
        try {
          start_device(i);
        } catch (const std::exception& e) {
          mark_failed(i, Error::from(e).at(options.devices[i].to_string()));
        }
      });
    }
    for (auto& t : threads) t.join();
  }

  /// The fleet's choice of run path (FleetOptions::request_ring) on a channel, before its first run.
  void choose_request_ring(detail::WorkerChannel& channel) const {
    if (options.request_ring) channel.choose_request_ring(*options.request_ring);
  }

  /// The one place a worker's session becomes this fleet's.
  void adopt(size_t i, Remote remote, detail::WorkerReady ready) {
    timeline.add_all(ready.timeline);
    remote.session = ready.session;
    {
      std::lock_guard lock(mutex);
      remotes[i] = std::move(remote);
    }
    mark_ready(i, std::move(ready.status), ready.inputs, ready.outputs);
  }

  void run_workers(detail::LocalMode mode) {
    const WorkerChoice& chosen = worker_choice();
    if (chosen.error) {
      for (size_t i = 0; i < status.size(); ++i) mark_failed(i, *chosen.error);
      return;
    }
    const std::string& executable = chosen.executable;
    const std::string& ort_library = chosen.ort_library;
    starting_workers.resize(options.devices.size());
    for_each_device([&](size_t i) {
      Remote remote;
      remote.process = std::make_shared<detail::WorkerProcess>(executable, options.devices[i], options.narrow_workers);
      {
        std::lock_guard lock(mutex);
        status[i].pid = remote.process->pid();
        starting_workers[i] = remote.process;
      }
      auto plan = plan_for({options.devices[i]}, mode);
      plan.ort_library = ort_library;
      choose_request_ring(remote.process->channel());
      auto ready = remote.process->start(plan, options.start_timeout_s);
      adopt(i, std::move(remote), std::move(ready));
    });
  }

  void run_on_pool() {
    for_each_device([&](size_t i) {
      auto on_pool = detail::start_on_pool(*options.pool, plan_for({options.devices[i]}, detail::LocalMode::overlapped), options.start_timeout_s);
      Remote remote;
      remote.process = std::move(on_pool.worker);
      remote.attached = std::move(on_pool.channel);  // of this fleet's own: closing it lets go of the session
      choose_request_ring(*remote.attached);
      adopt(i, std::move(remote), detail::ready_from_json(on_pool.ready));
    });
  }

  /// As the fleet ends: its own workers of ready devices, sessions loaded, for the pool it left. `mutex` held.
  std::vector<detail::HandedWorker> workers_to_hand_over() const {
    std::vector<detail::HandedWorker> handed;
    if (left_pool_socket.empty()) return handed;
    for (size_t i = 0; i < remotes.size(); ++i) {
      const Remote& r = remotes[i];
      if (r.process && !r.attached && status[i].state == DeviceState::ready && r.process->alive()) handed.push_back({r.process.get(), model});
    }
    return handed;
  }
  TransferCounters counters_at_shutdown;  // what crossed, kept once the channels are gone

  void run_on_pool_server() {
    remotes.resize(options.devices.size());
    for (size_t i = 0; i < status.size(); ++i) mark_starting(i);
    try {
      auto plan = plan_for(options.devices, detail::LocalMode::overlapped);
      // What the pool's workers do shows on their lanes; the rest (connecting, the pool choosing and
      // perhaps restoring a worker, the replies) on this one, so that every millisecond is said.
      auto asking = timeline.scope(phase::pool_request, "process");
      auto opened = detail::open_on_pool_server(options.pool_socket, plan, options.start_timeout_s);
      asking.finish();
      pool_connection = std::move(opened.connection);
      for (size_t i = 0; i < opened.devices.size(); ++i) {
        auto& d = opened.devices[i];
        if (d.error) {
          mark_failed(i, *d.error);
          continue;
        }
        Remote remote;
        remote.attached = std::move(d.channel);
        choose_request_ring(*remote.attached);
        adopt(i, std::move(remote), std::move(*d.ready));
      }
    } catch (const std::exception& e) {
      for (size_t i = 0; i < status.size(); ++i) {
        if (status[i].state == DeviceState::starting) mark_failed(i, Error::from(e));
      }
    }
  }
};

namespace {
/// Whether auto may start on the node's warm pool or leave one: FleetOptions::auto_pool, and ORTFLEET_AUTO_POOL (checked: 0 or 1).
bool auto_pool_allowed(const FleetOptions& options) { return options.auto_pool && detail::env_on(detail::EnvVar::auto_pool).value_or(true); }
}  // namespace

void Fleet::Impl::cancel_start() {
  std::vector<std::shared_ptr<detail::WorkerProcess>> workers;
  {
    std::lock_guard lock(mutex);
    if (!started || all_done()) return;
    start_cancelled = true;
    for (size_t i = 0; i < starting_workers.size(); ++i) {
      if (auto worker = starting_workers[i].lock(); worker && status[i].state == DeviceState::starting) workers.push_back(std::move(worker));
    }
  }
  for (auto& worker : workers) worker->terminate(/*grace_s=*/0.5);  // its start fails, which ends its device's thread
}

void Fleet::Impl::after_ready() {
  if (on_pool()) return;  // a pool's server makes the entries its starts miss
  std::optional<Device> missed;
  {
    std::lock_guard lock(mutex);
    if (start_cancelled) return;
    for (const auto& st : status) {
      if (st.state == DeviceState::ready && st.model_cache == "miss") {
        missed = st.device;
        break;
      }
    }
  }
  const bool fill = missed && options.config.session.model_cache_fill == ModelCacheFill::background;
  const auto say = [this](LeftBehind left) {
    std::lock_guard lock(mutex);
    left_behind.push_back(std::move(left));
  };
  std::optional<detail::LocalStartPlan> entry;
  if (fill) entry = plan_for({*missed}, detail::LocalMode::overlapped);
  try {
    const WorkerChoice& chosen = worker_choice();
    if (chosen.error) throw *chosen.error;
    const std::string& executable = chosen.executable;
    if (leaves_pool) {
      detail::LeftPool left;
      left.serve.socket_path = default_pool_socket();
      left.serve.left_by_job = true;  // a node daemon starting later takes it over
      left.serve.pool.devices = options.devices;
      left.serve.pool.ort_library = chosen.ort_library;
      left.serve.pool.worker_executable = executable;
      left.serve.pool.config = options.config;
      left.serve.pool.narrow_workers = options.narrow_workers;
      const PoolTimes& times = pool_times();
      if (times.idle_error) throw *times.idle_error;
      if (times.park_error) throw *times.park_error;
      left.default_idle_exit = !times.idle_exit_s;
      left.serve.idle_exit_s = times.idle_exit_s.value_or(0);
      left.serve.park_after_s = times.park_after_s;
      if (entry) {
        entry->ort_library = left.serve.pool.ort_library;
        left.make_entry = entry;  // later starts that do not find the model resident load it
      }
      const detail::LaunchedPool launched = detail::launch_pool_daemon(left, executable);
      {
        std::lock_guard lock(mutex);
        left_pool_socket = left.serve.socket_path;
      }
      const std::string parking = launched.parking.state == ParkingStatus::State::on
                                      ? fmt::format("its workers park after {:g} s unused (no GPU memory held), ", launched.park_after_s)
                                  : launched.parking.state == ParkingStatus::State::off ? std::string()
                                                                                         : "its workers do not park (" + launched.parking.why + "), ";
      say({LeftBehind::Kind::warm_pool, left.serve.socket_path, detail::pool_log_path(left.serve.socket_path),
           fmt::format("left a warm pool for {} ({}): this job's workers go to it as the job ends, {} loaded{}; {}it exits after {:g} s "
                       "unused (its log {}); {}",
                       launched.audience, left.serve.socket_path, model, entry ? ", and it makes the model's cache entry in the background" : "",
                       parking, launched.idle_exit_s, detail::pool_log_path(left.serve.socket_path), options.no_warm_pool_advice)});
      return;
    }
    if (fill) {
      cache_fill = std::make_unique<detail::BackgroundFill>(*entry, executable, options.narrow_workers);
      say({LeftBehind::Kind::cache_entry, {}, {}, "making the model cache entry of " + model + " in the background (a low-priority worker; later starts load it)"});
    }
  } catch (const std::exception& e) {
    say({LeftBehind::Kind::nothing, {}, {}, "nothing left for later starts: " + Error::from(e).what_failed()});
  }
}

const Fleet::Impl::WorkerChoice& Fleet::Impl::worker_choice() {
  std::call_once(worker_chosen, [this] {
    try {
      const detail::WorkerRuntime runtime = detail::resolve_worker_runtime(options.worker_executable, options.ort_library);
      worker_choice_.executable = runtime.executable;
      worker_choice_.ort_library = runtime.ort_library;
    } catch (const Error& e) {
      worker_choice_.error = e;
    }
  });
  return worker_choice_;
}

const Fleet::Impl::PoolTimes& Fleet::Impl::pool_times() {
  std::call_once(pool_times_chosen, [this] {
    try {
      pool_times_.idle_exit_s = options.config.warm_pool.chosen_idle_exit_s();
    } catch (const Error& e) {
      pool_times_.idle_error = e;
    }
    try {
      pool_times_.park_after_s = options.config.warm_pool.resolved_park_after_s();
    } catch (const Error& e) {
      pool_times_.park_error = e;
    }
  });
  return pool_times_;
}

std::string Fleet::Impl::PoolPassedOver::words() const {
  switch (why) {
    case Why::lacks_devices: return fmt::format(" (the warm pool on {} does not serve {})", socket, detail);
    case Why::other_runtime: return fmt::format(" (the warm pool on {} is not used: {})", socket, detail);
    case Why::unusable: return fmt::format(" (the default pool socket {} is not usable: {})", socket, detail);
    case Why::none_left: return " (nothing left for later starts: " + detail + ")";
  }
  return {};
}

std::string Fleet::Impl::AutoChoice::words() const {
  const std::string floor = gpus > 0 ? "the floor of a GPU start holds max(EP load and registration, cuInit + context), which only the fleet's "
                                       "overlapped start reaches (the plain strategies pay their sum)"
                                     : "the model is read while ONNX Runtime loads";
  const std::string note = passed_over ? passed_over->words() : std::string();
  switch (why) {
    case StrategyWhy::as_asked: return "as asked";
    case StrategyWhy::on_pool: return "auto chose fleet: " + floor + "; on the warm worker pool";
    case StrategyWhy::one_process_asked: return "auto chose fleet: " + floor + "; every GPU in this process, as asked (one_process)";
    case StrategyWhy::pool_answered:
      return fmt::format("auto chose the warm worker pool on {}: it answered and serves {}, so no worker process, runtime load, cuInit "
                         "or context is paid, and a model it holds is handed over at once (ORTFLEET_AUTO_POOL=0 starts cold)",
                         pool_socket, devices);
    case StrategyWhy::leaves_pool:
      return "auto chose fleet: " + floor + "; a worker process per device, which the warm pool this start leaves takes over, model " +
             "loaded, for the next job (" + named(Setting::warm_pool_idle, "0") + " leaves none)";
    case StrategyWhy::cpu: return "auto chose fleet: " + floor + "; one process" + note;
    case StrategyWhy::record_one_process:
      return fmt::format("auto chose fleet in one process: on this machine ({}) {} started {} GPUs in {:.0f} ms vs {:.0f} ms for {}{}", record,
                         start_way_words(faster), gpus, faster_ms, slower_ms, start_way_words(slower), note);
    case StrategyWhy::record_workers:
      return fmt::format("auto chose fleet: on this machine ({}) {} started {} GPUs in {:.0f} ms vs {:.0f} ms for {}{}", record,
                         start_way_words(faster), gpus, faster_ms, slower_ms, start_way_words(slower), note);
    case StrategyWhy::one_gpu:
      return "auto chose fleet: " + floor + "; one GPU: a worker process, where cuDNN's recorded choices apply (libortfleet_cudnn.so is "
             "preloaded into workers, not into this process; no bench record of 1 GPU on this machine: 'ortfleet bench' saves one)" + note;
    case StrategyWhy::several_gpus:
      return "auto chose fleet: " + floor + "; " + std::to_string(gpus) +
             " GPUs: a worker process each, as GPUs in one process contend in the driver (no bench record of " + std::to_string(gpus) +
             " GPUs on this machine: 'ortfleet bench' saves one)" + note;
    case StrategyWhy::known_crash:
      return "auto chose a worker process per device: this model crashed ONNX Runtime here before, and a crash in a worker "
             "cannot end this process (" + crash + ")";
  }
  return {};
}

Fleet::Impl::AutoChoice Fleet::Impl::choose_automatically(long gpus) {
  auto& s = *this;
  AutoChoice choice;
  choice.gpus = gpus;
  if (s.on_pool()) {
    choice.why = StrategyWhy::on_pool;
    return choice;
  }
  if (s.options.one_process && gpus >= 1) {
    choice.why = StrategyWhy::one_process_asked;
    return choice;
  }
  if (auto_pool_allowed(s.options)) {
    const std::string socket = default_pool_socket();
    const detail::PoolProbe found = detail::probe_pool(socket, 2.0);
    if (found.kind == detail::PoolProbe::Kind::ours) {
      std::vector<std::string> missing;
      for (const auto& d : s.options.devices) {
        if (std::find(found.devices.begin(), found.devices.end(), d.to_string()) == found.devices.end()) missing.push_back(d.to_string());
      }
      // A runtime this start names is served only by a pool whose workers run that very library.
      const auto other_runtime = detail::pool_runtime_mismatch(found, s.options.ort_library);
      if (other_runtime) {
        choice.passed_over = PoolPassedOver{PoolPassedOver::Why::other_runtime, socket, *other_runtime};
      } else if (missing.empty()) {
        s.options.pool_socket = socket;
        choice.why = StrategyWhy::pool_answered;
        choice.pool_socket = socket;
        choice.devices = to_string(s.options.devices);
        return choice;
      } else {
        choice.passed_over = PoolPassedOver{PoolPassedOver::Why::lacks_devices, socket, fmt::format("{}", fmt::join(missing, ", "))};
      }
    } else if (found.kind == detail::PoolProbe::Kind::unusable) {
      choice.passed_over = PoolPassedOver{PoolPassedOver::Why::unusable, socket, found.why};
    } else {
      // Nobody there: this start leaves a pool, and its sessions start in workers that the pool then
      // takes over, loaded, as the job ends (the next job finds its model resident). An idle time of 0
      // leaves none; one that cannot be read leaves none either, and the start says why.
      const PoolTimes& times = s.pool_times();
      if (times.idle_error) {
        choice.passed_over = PoolPassedOver{PoolPassedOver::Why::none_left, socket, times.idle_error->what_failed()};
      } else if (!times.idle_exit_s || *times.idle_exit_s > 0) {
        s.leaves_pool = true;
        choice.why = StrategyWhy::leaves_pool;
        return choice;
      }
    }
  }
  if (gpus == 0) {
    choice.why = StrategyWhy::cpu;
    return choice;
  }
  if (const auto record = find_start_record(static_cast<int>(gpus)); record && record->start_ms.count(StartWay::workers) != 0) {
    // A worker process per GPU against the fastest start in one process the record has: the fleet's own first.
    const double workers_ms = record->start_ms.at(StartWay::workers);
    for (const StartWay one : {StartWay::one_process, StartWay::threads}) {
      const auto found = record->start_ms.find(one);
      if (found == record->start_ms.end()) continue;
      s.options.one_process = found->second < workers_ms;
      choice.why = s.options.one_process ? StrategyWhy::record_one_process : StrategyWhy::record_workers;
      choice.record = record->described();
      choice.faster = s.options.one_process ? one : StartWay::workers;
      choice.slower = s.options.one_process ? StartWay::workers : one;
      choice.faster_ms = std::min(found->second, workers_ms);
      choice.slower_ms = std::max(found->second, workers_ms);
      return choice;
    }
  }
  choice.why = gpus == 1 ? StrategyWhy::one_gpu : StrategyWhy::several_gpus;
  return choice;
}

namespace {
/// A preferred pool (FleetOptions::preferred_pool) becomes the fleet's pool where it has every device asked
/// for and nothing else was given; its devices are the fleet's when none were asked for.
void take_preferred_pool(FleetOptions& o) {
  auto preferred = std::move(o.preferred_pool);
  if (!preferred || o.pool != nullptr || !o.pool_socket.empty()) return;
  if (o.strategy != Strategy::automatic && o.strategy != Strategy::fleet) return;
  const auto& have = preferred->devices();
  const auto& want = o.devices.empty() ? have : o.devices;
  if (!std::all_of(want.begin(), want.end(), [&](const Device& d) { return std::find(have.begin(), have.end(), d) != have.end(); })) return;
  o.pool = std::move(preferred);
  if (o.devices.empty()) o.devices = have;
}
}  // namespace

namespace {
/// The folder ONNX Runtime writes its profiles into, wherever the sessions are made (here, in workers
/// or on a pool): a file in its place, or a folder that cannot be made or written, is refused before any
/// work, the same way on every front end (Python's profile_dir said the standard library's "filesystem
/// error: cannot create directories: Not a directory [...]" as a failed device). A missing one is made.
void prepare_profile_dir(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_directory(status)) {
    throw Error(named(Setting::profile_dir, dir) + " is not a folder", "Give a folder for ONNX Runtime's profiles (it is made when missing)");
  }
  if (!std::filesystem::exists(status) && !std::filesystem::create_directories(dir, ec) && ec) {
    throw Error(named(Setting::profile_dir, dir) + " cannot be made: " + ec.message(), "Give a folder you can write (it is made when missing)");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw Error(named(Setting::profile_dir, dir) + " is not writable: " + std::strerror(errno), "Give a folder you can write");
  }
}
}  // namespace

Fleet::Fleet(std::string model_path, FleetOptions options) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  s.model = std::move(model_path);
  check_environment();  // a bad ORTFLEET_* variable refused in one line naming it (or warned about), before any work
  checked_text(Setting::model, s.model);  // a NUL byte would cut the path where the file is opened
  validate_model_file(s.model);
  take_preferred_pool(options);
  if (options.devices.empty()) {
    DeviceSelection all = select_devices("all");
    options.devices = std::move(all.devices);
    s.devices_reason = std::move(all.reason);
  }
  check_cpu_devices_fit(options.devices);
  // The providers the config stacks, and their options, refused before anything starts.
  for (const auto& d : options.devices) detail::provider_stack(d, options.config);
  checked_number(Setting::start_timeout, options.start_timeout_s);  // as the command line's --timeout: above 0, at most a week
  checked_number(Setting::run_timeout, options.run_timeout_s);
  checked_number(Setting::warmup_runs, options.warmup_runs);
  for (const auto& [setting, path] : {std::pair{Setting::ort_library, &options.ort_library}, std::pair{Setting::profile_dir, &options.profile_dir},
                                      std::pair{Setting::pool, &options.pool_socket}, std::pair{Setting::worker_executable, &options.worker_executable}}) {
    if (!path->empty()) checked_text(setting, *path);  // no path holds a NUL byte, which would cut it where it is opened
  }
  prepare_profile_dir(options.profile_dir);
  if (options.config.cuda.cuda_graph &&
      std::none_of(options.devices.begin(), options.devices.end(), [](const Device& d) { return detail::device_has(d, detail::Capability::graph_capture); })) {
    spdlog::warn("{} is on, but the devices ({}) are CPUs: CUDA graphs need a GPU, so the sessions run without them",
                 named(Setting::cuda_graph), to_string(options.devices));
  }
  s.options = std::move(options);
  s.strategy = s.options.strategy == Strategy::automatic ? Strategy::fleet : s.options.strategy;
  const auto gpus = std::count_if(s.options.devices.begin(), s.options.devices.end(),
                                  [](const Device& d) { return detail::device_has(d, detail::Capability::device_memory); });
  if (s.options.strategy == Strategy::automatic) s.auto_choice = s.choose_automatically(gpus);
  // Several GPUs in one process contend inside the CUDA driver and ONNX Runtime (module loading,
  // cuDNN/cuBLAS handle creation, allocation): the fleet gives each GPU its own process, unless this
  // machine's bench found one process faster.
  const bool on_pool = s.on_pool();
  // On one GPU too: a worker preloads libortfleet_cudnn.so, so its first inference replays cuDNN's
  // recorded choices (this process cannot load it after the fact); bench's "fleet, one process" row
  // measures the other way, and auto follows this machine's record.
  s.use_workers = s.strategy == Strategy::processes || (s.strategy == Strategy::fleet && gpus >= 1 && !s.options.one_process) || on_pool ||
                  s.leaves_pool;
  if (s.options.strategy == Strategy::automatic && !on_pool) {
    if (const auto crash = detail::known_crash(s.model)) {
      // A crash inside ONNX Runtime in this process would end the caller's job: contain it.
      s.use_workers = true;
      s.options.one_process = false;
      s.auto_choice.why = StrategyWhy::known_crash;
      s.auto_choice.crash = *crash;
    }
  }
  if (s.options.pool != nullptr && !s.options.pool_socket.empty()) {
    throw Error("a fleet starts on one pool: both a WorkerPool and a pool socket were given", "Give one of them");
  }
  if (on_pool && s.strategy != Strategy::fleet) {
    throw Error("a worker pool starts sessions the fleet's way, not with strategy " + to_string(s.strategy),
                "Leave the strategy at auto or fleet when starting on a pool");
  }
  for (const auto& d : s.options.devices) {
    DeviceStatus st;
    st.device = d;
    s.status.push_back(st);
  }
  s.failures.resize(s.status.size());
  // A start on a node daemon: its parked workers restore now, while this job goes on (issue 60).
  if (!s.options.pool_socket.empty()) detail::restore_ahead_on_pool(s.options.pool_socket, s.options.devices, s.model, 2.0);
}

Fleet::~Fleet() {
  if (impl_->forked_copy()) {
    static_cast<void>(impl_.release());  // the parent's: its threads are not this process's to join
    return;
  }
  shutdown();
}

void Fleet::start() {
  auto& s = *impl_;
  s.refuse_forked_copy();
  {
    std::lock_guard lock(s.mutex);
    if (s.started) throw Error("this fleet was already started", "Make a new Fleet to start again");
    s.started = true;
    s.start_ns = monotonic_ns();
    s.timeline.set_origin_ns(s.start_ns);
  }
  s.coordinator = std::thread([&s] {
    switch (s.strategy) {
      case Strategy::sequential: s.run_local(detail::LocalMode::sequential); break;
      case Strategy::threads: s.run_local(detail::LocalMode::threads); break;
      case Strategy::processes: s.run_workers(detail::LocalMode::threads); break;
      case Strategy::fleet:
      case Strategy::automatic:
        if (s.options.pool != nullptr) s.run_on_pool();
        else if (!s.options.pool_socket.empty()) s.run_on_pool_server();
        else if (s.use_workers) s.run_workers(detail::LocalMode::overlapped);
        else s.run_local(detail::LocalMode::overlapped);
        break;
    }
    s.after_ready();
    std::lock_guard lock(s.mutex);
    s.after_ready_done = true;
    s.changed.notify_all();
  });
}

bool Fleet::wait() { return wait(std::numeric_limits<double>::infinity()); }

bool Fleet::wait(double timeout_s) {
  auto& s = *impl_;
  s.refuse_forked_copy();
  if (std::isnan(timeout_s) || timeout_s < 0) throw Error("wait() needs a timeout of 0 seconds or more", "Leave it out to wait for every device");
  const int64_t deadline = detail::deadline_in(timeout_s, monotonic_ns());
  std::unique_lock lock(s.mutex);
  if (!s.started) throw Error("wait() before start()", "Call start() first");
  if (!s.wait_until(lock, deadline, [&] { return s.all_done(); })) return false;
  return std::all_of(s.status.begin(), s.status.end(), [](const DeviceStatus& d) { return d.state == DeviceState::ready; });
}

bool Fleet::ready(const Device& device) const {
  impl_->refuse_forked_copy();
  std::lock_guard lock(impl_->mutex);
  impl_->note_gone_workers();
  return impl_->status[impl_->index_of(device)].state == DeviceState::ready;
}

std::vector<DeviceStatus> Fleet::status() const {
  impl_->refuse_forked_copy();
  std::lock_guard lock(impl_->mutex);
  impl_->note_gone_workers();
  // A session in this process says how its tiered start goes now (a worker's said it at ready).
  for (size_t i = 0; i < impl_->local.size() && i < impl_->status.size(); ++i) {
    if (impl_->local[i].session) detail::note_tier(impl_->status[i], impl_->local[i].session->tier());
  }
  return impl_->status;
}

const std::vector<Device>& Fleet::devices() const { return impl_->options.devices; }
Strategy Fleet::strategy() const { return impl_->strategy; }

std::string Fleet::strategy_reason() const { return impl_->options.strategy == Strategy::automatic ? impl_->auto_choice.words() : "as asked"; }

StrategyWhy Fleet::strategy_why() const { return impl_->options.strategy == Strategy::automatic ? impl_->auto_choice.why : StrategyWhy::as_asked; }

std::string Fleet::devices_reason() const { return impl_->devices_reason; }

std::vector<TensorSpec> Fleet::inputs() const {
  impl_->refuse_forked_copy();
  {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->inputs.empty()) return impl_->inputs;
  }
  return inspect_model(impl_->model).input_specs;  // before a session has read them
}
std::vector<TensorSpec> Fleet::outputs() const {
  impl_->refuse_forked_copy();
  {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->outputs.empty()) return impl_->outputs;
  }
  return inspect_model(impl_->model).output_specs;
}

Fleet::Impl::Target Fleet::Impl::ready_target(const Device& device) {
  refuse_forked_copy();
  std::unique_lock lock(mutex);
  const size_t i = index_of(device);
  if (!started) throw Error("run() on " + device.to_string() + " before start()", "Call start() first");
  // A device still starting is waited for, as long as its start may take; one that failed says why.
  const auto settled = [&] { return status[i].state != DeviceState::pending && status[i].state != DeviceState::starting; };
  if (!wait_until(lock, detail::deadline_in(options.start_timeout_s, start_ns), settled)) {
    throw Error(device.to_string() + " did not become ready within " + detail::seconds_text(options.start_timeout_s),
                "It is still starting; if start-ups this long are expected, raise the start timeout (" + named(Setting::start_timeout) + ")",
                device.to_string());
  }
  note_gone_workers();
  if (status[i].state == DeviceState::failed) {
    const auto& failure = *failures[i];
    if (failure.after_ready) throw failure.error;
    throw Error(device.to_string() + " failed to start: " + failure.error.what_failed(), failure.error.hint(), device.to_string());
  }
  if (status[i].state != DeviceState::ready) throw Error("the fleet is shut down", {}, device.to_string());
  Target target;
  if (use_workers) {
    target.worker = remotes[i].channel();
    target.remote_session = remotes[i].session;
  } else {
    target.session = local[i].session.get();
  }
  return target;
}

template <class Call>
auto Fleet::Impl::on_worker(const Device& device, detail::WorkerChannel& worker, Call call) -> decltype(call()) {
  try {
    return call();
  } catch (const Error& e) {
    // A worker that died or was killed for not answering serves no later run: the device has failed.
    if (!worker.alive()) mark_failed(index_of(device), e, /*after_ready=*/true);
    throw;
  }
}

std::vector<Tensor> Fleet::run(const Device& device, const std::vector<Tensor>& inputs, bool outputs_on_device) {
  auto& s = *impl_;
  const auto target = s.ready_target(device);
  if (target.worker != nullptr) {
    return s.on_worker(device, *target.worker,
                       [&] { return target.worker->run(target.remote_session, inputs, s.options.run_timeout_s, outputs_on_device); });
  }
  return target.session->run(inputs, outputs_on_device);
}

std::future<std::vector<Tensor>> Fleet::run_async(const Device& device, const std::vector<Tensor>& inputs, bool outputs_on_device) {
  auto& s = *impl_;
  const auto target = s.ready_target(device);
  if (target.worker != nullptr) {
    // A worker that dies with this run in flight fails its future, and its device has failed from then
    // on (note_gone_workers), whether or not anyone calls get().
    return s.on_worker(device, *target.worker,
                       [&] { return target.worker->run_async(target.remote_session, inputs, s.options.run_timeout_s, outputs_on_device); });
  }
  return std::async(std::launch::async, [session = target.session, inputs, outputs_on_device] { return session->run(inputs, outputs_on_device); });
}

Timeline Fleet::timeline() const { return impl_->timeline; }

std::vector<std::string> Fleet::left_behind() const {
  std::vector<std::string> notes;
  for (const auto& left : what_is_left()) notes.push_back(left.note);
  return notes;
}

std::vector<LeftBehind> Fleet::what_is_left() const {
  auto& s = *impl_;
  if (s.forked_copy()) return {};  // what the parent left is the parent's to say
  std::unique_lock lock(s.mutex);
  // Every device done: what after_ready() decides is waited for, a pool's launch at most.
  if (s.started && s.all_done()) s.wait_until(lock, detail::deadline_in(s.options.start_timeout_s, monotonic_ns()), [&] { return s.after_ready_done; });
  return s.left_behind;
}

bool Fleet::making_cache_entry() const { return impl_->cache_fill && !impl_->cache_fill->finished(); }

std::optional<std::string> Fleet::wait_for_cache_fill(double timeout_s) {
  auto& s = *impl_;
  s.refuse_forked_copy();
  if (s.coordinator.joinable()) s.coordinator.join();  // after_ready runs there
  if (!s.cache_fill) return std::nullopt;
  return s.cache_fill->wait(timeout_s);
}

TransferCounters Fleet::transfer_counters() const {
  impl_->refuse_forked_copy();
  std::lock_guard lock(impl_->mutex);
  if (impl_->shut_down) return impl_->counters_at_shutdown;
  TransferCounters total;
  for (const auto& r : impl_->remotes) {
    if (r.attached || r.process) total += r.channel()->transfer_counters();
  }
  return total;
}

void Fleet::shutdown() {
  auto& s = *impl_;
  if (s.forked_copy()) return;  // the parent's workers and sessions: never stopped from a forked child
  s.cancel_start();
  if (s.coordinator.joinable()) s.coordinator.join();
  // What the fleet holds is taken out under the lock and let go after it: releasing sessions, handing
  // workers over and stopping them talk to other processes (up to seconds each), and status() or run()
  // on another thread must not wait for that. From here on they see the devices stopped.
  std::vector<detail::LocalDeviceResult> local;
  std::vector<Impl::Remote> remotes;
  std::vector<detail::HandedWorker> handed;
  std::string left_pool_socket;
  std::unique_ptr<detail::MessageChannel> pool_connection;
  std::unique_ptr<detail::BackgroundFill> cache_fill;
  {
    std::lock_guard lock(s.mutex);
    if (s.shut_down) return;
    for (const auto& r : s.remotes) {
      if (r.attached || r.process) s.counters_at_shutdown += r.channel()->transfer_counters();
    }
    s.shut_down = true;
    handed = s.workers_to_hand_over();
    left_pool_socket = s.left_pool_socket;
    local.swap(s.local);
    remotes.swap(s.remotes);
    pool_connection = std::move(s.pool_connection);
    cache_fill = std::move(s.cache_fill);
    for (auto& st : s.status) {
      if (st.state == DeviceState::ready) st.state = DeviceState::stopped;
    }
    s.changed.notify_all();
  }
  local.clear();
  // A pool keeps the sessions resident for the next fleet; let go of them now, not whenever the
  // worker notices the channel closed, so that the next start may evict them.
  for (auto& r : remotes) {
    if (r.attached && r.attached->alive()) r.attached->release(r.session);
  }
  if (!handed.empty()) {  // to the pool this start left, loaded: the next job finds the model there
    const size_t taken = detail::hand_over_to_pool(left_pool_socket, handed, 10);
    spdlog::debug("handed {} of {} worker(s), {} loaded, to the warm pool on {}", taken, handed.size(), s.model, left_pool_socket);
  }
  remotes.clear();  // own workers stop (unless handed over); channels to a pool close
  pool_connection.reset();
  cache_fill.reset();  // an entry still in the making is abandoned: its worker removes what it wrote
}

}  // namespace ortfleet
