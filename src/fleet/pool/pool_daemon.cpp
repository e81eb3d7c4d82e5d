#include "fleet/pool/pool_daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <chrono>
#include <thread>

#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "base/slurm.hpp"
#include "base/unique_fd.hpp"
#include "fleet/pool/pool_client.hpp"
#include "fleet/pool/pool_paths.hpp"
#include "fleet/pool/pool_protocol.hpp"
#include "fleet/pool/worker_parking.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "process/spawn.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// The descriptor on which a launched daemon says it listens (the launcher passes it on).
constexpr int kReadyFd = 3;
/// How long a job waits for the pool it leaves to listen (it is a fraction of a second).
constexpr double kListenWaitS = 10;
/// How long a node daemon waits for the jobs of a pool a job left to end before it takes that pool's
/// socket; past it, it fails (and a unit's restart tries again).
constexpr double kTakeOverWaitS = 600;

std::string gigabytes(uint64_t bytes) { return fmt::format("{:.2f} GB", static_cast<double>(bytes) / 1e9); }

/// One line per worker, and the device memory the pool holds while idle (GPU workers: contexts,
/// primed libraries, spare workers) until they park.
void announce(PoolServer& server, bool ready, bool none_started, double park_after_s) {
  const json status = json::parse(server.pool().status_json());
  std::map<std::string, uint64_t> memory;
  for (const auto& d : status.at("devices")) {
    if (d.contains("gpu_memory_bytes") && d.at("gpu_memory_bytes").is_number_unsigned()) memory[d.value("device", "")] += d.at("gpu_memory_bytes").get<uint64_t>();
  }
  for (const auto& w : server.pool().status()) {
    std::cerr << fmt::format("  {}: {} (worker pid {}{}{})\n", w.device.to_string(), w.state, w.pid,
                             w.visible_devices.empty() ? "" : ", CUDA_VISIBLE_DEVICES=" + w.visible_devices, w.error.empty() ? "" : ": " + w.error);
  }
  if (none_started) {
    std::cerr << "no worker started: the pool stops" << std::endl;
    return;
  }
  std::string held;
  for (const auto& [device, bytes] : memory) {
    if (device.rfind("cuda:", 0) == 0) held += fmt::format("{}{} {}", held.empty() ? "" : ", ", device, gigabytes(bytes));
  }
  std::cerr << (ready ? "pool ready; " : "pool started with failures; ") << "serving on " << server.socket_path();
  if (!held.empty()) {
    std::cerr << "; GPU memory in use: " << held;
    if (park_after_s > 0) std::cerr << fmt::format(" until its workers park after {:g} s idle", park_after_s);
  }
  std::cerr << " (SIGTERM, Ctrl-C or `ortfleet pool stop` stops it)" << std::endl;
}

/// Why no device of `pool` has a worker, once each has settled: its workers' reasons, one line (each
/// reason once, however many devices share it); "" when a device's worker started or still starts.
std::string no_worker_started(const WorkerPool& pool) {
  std::vector<std::string> reasons;
  for (const auto& w : pool.status()) {
    if (w.state != "failed") return "";
    const std::string reason = w.error.empty() ? w.device.to_string() + ": its worker failed" : w.error;
    if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) reasons.push_back(reason);
  }
  std::string text = "no worker of the warm pool started, so it serves nothing: ";
  for (size_t i = 0; i < reasons.size(); ++i) text += (i == 0 ? "" : "; ") + reasons[i];
  return text;
}
constexpr const char* kNoWorkerHint = "Fix what the workers say and serve again; `ortfleet doctor` checks the runtime and each device";

/// The daemon works in "/": it never keeps a user's folder busy (a job's that left it, `serve --detach`'s
/// shell's). What it was asked to do names files from the folder it started in: made absolute first, as
/// are the relative paths in ortfleet's variables (and TMPDIR) that it and its workers read.
void work_in_root(LeftPool& left) {
  left.serve.socket_path = absolute_in(left.serve.socket_path, "");
  left.serve.pool.ort_library = absolute_in(left.serve.pool.ort_library, "");
  left.serve.pool.worker_executable = absolute_in(left.serve.pool.worker_executable, "");
  left.serve.pool.config = with_absolute_paths(left.serve.pool.config, "");
  for (auto& model : left.serve.preload.models) model = absolute_in(model, "");
  left.serve.preload.state_dir = absolute_in(left.serve.preload.state_dir, "");
  if (left.make_entry) left.make_entry = with_absolute_paths(*left.make_entry, "");
  detail::work_in_root();
}

json request_json(const LeftPool& left) {
  const ServeOptions& o = left.serve;
  json devices = json::array();
  for (const auto& d : o.pool.devices) devices.push_back(d.to_string());
  return {{"socket", o.socket_path},
          {"devices", devices},
          {"ort_library", o.pool.ort_library},
          {"worker_executable", o.pool.worker_executable},
          {"config", json::parse(o.pool.config.to_json())},
          {"narrow_workers", o.pool.narrow_workers},
          {"prime_libraries", o.pool.prime_libraries},
          {"isolate_new_models", o.pool.isolate_new_models},
          {"max_resident_sessions", o.pool.max_resident_sessions},
          {"unload_above_bytes", o.pool.unload_above_bytes},
          {"preload", {{"models", o.preload.models},
                       {"cached", o.preload.cached},
                       {"remember", o.preload.remember},
                       {"budget_bytes", o.preload.budget_bytes ? json(*o.preload.budget_bytes) : json(nullptr)},
                       {"state_dir", o.preload.state_dir}}},
          {"idle_exit_s", left.default_idle_exit ? json(nullptr) : json(o.idle_exit_s)},
          {"park_after_s", o.park_after_s},
          {"fold_after_s", o.fold_after_s},
          {"left_by_job", o.left_by_job},
          {"make_entry", left.make_entry ? plan_to_json(*left.make_entry) : json(nullptr)},
          {"ready_fd", kReadyFd}};
}

LeftPool left_pool_from_json(const json& request) {
  LeftPool left;
  ServeOptions& options = left.serve;
  options.socket_path = request.at("socket").get<std::string>();
  for (const auto& d : request.at("devices")) options.pool.devices.push_back(Device::parse(d.get<std::string>()));
  options.pool.ort_library = request.at("ort_library").get<std::string>();
  options.pool.worker_executable = request.value("worker_executable", "");
  options.pool.config = RunConfig::from_json(request.at("config").dump(), "the warm pool's request");
  options.pool.narrow_workers = request.value("narrow_workers", true);
  options.pool.prime_libraries = request.value("prime_libraries", true);
  options.pool.isolate_new_models = request.value("isolate_new_models", true);
  options.pool.max_resident_sessions = request.value("max_resident_sessions", size_t{0});
  options.pool.unload_above_bytes = request.value("unload_above_bytes", PoolOptions{}.unload_above_bytes);
  if (const auto p = request.find("preload"); p != request.end() && p->is_object()) {
    options.preload.models = p->value("models", std::vector<std::string>{});
    options.preload.cached = p->value("cached", false);
    options.preload.remember = p->value("remember", false);
    if (p->contains("budget_bytes") && !p->at("budget_bytes").is_null()) options.preload.budget_bytes = p->at("budget_bytes").get<uint64_t>();
    options.preload.state_dir = p->value("state_dir", "");
  }
  left.default_idle_exit = request.at("idle_exit_s").is_null();
  options.idle_exit_s = left.default_idle_exit ? 0.0 : request.at("idle_exit_s").get<double>();
  options.park_after_s = request.value("park_after_s", 0.0);
  options.fold_after_s = request.value("fold_after_s", ServeOptions{}.fold_after_s);
  options.left_by_job = request.value("left_by_job", false);
  if (!request.at("make_entry").is_null()) left.make_entry = plan_from_json(request.at("make_entry"));
  return left;
}

/// Writes `line` (one line of JSON) to `fd` and closes it; a reader that went away is no error.
void say_once(int fd, const json& line) {
  if (fd < 0) return;
  const std::string text = line.dump() + "\n";
  [[maybe_unused]] const auto written = ::write(fd, text.data(), text.size());
  ::close(fd);
}

/// What `fd` (a pipe) carries up to its first newline, or its end, read for at most `seconds`.
std::string read_line_before(int fd, double seconds) {
  std::string line;
  const int64_t deadline = deadline_in(seconds, monotonic_ns());
  char c = 0;
  while (line.find('\n') == std::string::npos) {
    const int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
    pollfd p{fd, POLLIN, 0};
    if (left_ms <= 0 || ::poll(&p, 1, static_cast<int>(left_ms)) <= 0) break;
    const ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) break;
    line.push_back(c);
  }
  return line;
}

/// A pool serves up to a few hundred connections (two descriptors each): the soft limit on open files
/// (often 1024) is raised to what the hard limit allows, up to `wanted`. In the daemon only: in a
/// process of the user's, a limit past 1024 would break code that still uses select().
void raise_open_file_limit(rlim_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= wanted) return;
  limit.rlim_cur = std::min(wanted, limit.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

std::string pool_log_path(const std::string& socket_path) { return socket_path + ".log"; }

int serve_until_stopped(const LeftPool& left_in, bool quiet, int ready_fd) {
  // SIGTERM, SIGINT and SIGHUP (its terminal gone, a detached daemon's session ended) are taken by one
  // thread that stops the server: blocked here, before any other thread exists, so that every thread
  // inherits the mask. Each ends the daemon alike: workers stopped, socket removed.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  raise_open_file_limit(4096);
  LeftPool left = left_in;
  work_in_root(left);
  const ParkingStatus parking = parking_status(left.serve.pool.devices, left.serve.park_after_s);
  const bool parks = parking.state == ParkingStatus::State::on;
  if (left.default_idle_exit) {
    left.serve.idle_exit_s = WarmPoolOptions::default_idle_exit_s(parks);
  }
  std::optional<PoolServer> made;
  try {
    made.emplace(left.serve);  // refuses a socket it cannot take before a word is said
  } catch (const std::exception& e) {
    say_once(ready_fd, {{"error", error_to_json(e)}});
    throw;
  }
  PoolServer& server = *made;
  // Before the job hears that the pool listens: the fill copies the plan's input files, which the job
  // may delete as soon as it has heard.
  if (left.make_entry) server.make_entry_in_background(*left.make_entry);
  const json listening = {{"listening", true}, {"idle_exit_s", left.serve.idle_exit_s}, {"park_after_s", left.serve.park_after_s}, {"parking", to_json(parking)}};
  // A job that leaves a pool must not wait for its workers; `serve --detach` hears once a device's worker
  // serves, or that none started (its parent then fails with their reasons, rather than say the pool serves).
  int settled_fd = -1;
  if (left.serve.left_by_job) say_once(ready_fd, listening);
  else settled_fd = ready_fd;
  if (!quiet) std::cerr << "starting workers for " << to_string(left.serve.pool.devices) << " ..." << std::endl;
  std::thread stopper([&server, stop_signals] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    server.stop();
  });
  // Said once every worker is ready or failed; a pool stopped before (SIGTERM while a worker starts for
  // an hour) says nothing and is not held up.
  // A pool none of whose workers started serves nothing: it stops, and says why (exit 1).
  std::atomic<bool> served{false};
  std::string none_started;  // the announcer's until it is joined
  std::thread announcer([&, quiet, park_after_s = parks ? left.serve.park_after_s : 0.0] {
    const int64_t deadline = deadline_in(server.pool().options().start_timeout_s, monotonic_ns());
    while (!served) {
      const bool ready = server.pool().wait(0.25);
      const auto workers = server.pool().status();
      const bool settled = std::none_of(workers.begin(), workers.end(), [](const PoolWorkerStatus& w) { return w.state == "starting"; });
      if (ready || settled || monotonic_ns() >= deadline) {
        none_started = no_worker_started(server.pool());
        if (!quiet) announce(server, ready, !none_started.empty(), park_after_s);
        if (none_started.empty()) {
          say_once(settled_fd, listening);
        } else {
          say_once(settled_fd, {{"error", error_to_json(Error(none_started, kNoWorkerHint))}});
          server.stop();
        }
        return;
      }
    }
    say_once(settled_fd, {{"error", error_to_json(Error("the warm pool was stopped before its workers started"))}});
  });
  if (!quiet) {
    if (left.serve.idle_exit_s > 0) std::cerr << fmt::format("it exits after {:g} s with nobody attached", left.serve.idle_exit_s) << std::endl;
    if (parking.state == ParkingStatus::State::unavailable) std::cerr << "its workers do not park: " << parking.why << std::endl;
  }
  server.serve();
  served = true;
  announcer.join();
  // The stopper ends with the signal that stopped the server; a stop for another reason sends it one.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  if (!quiet) std::cerr << "stopping the workers and removing " << server.socket_path() << std::endl;
  if (!none_started.empty()) throw Error(none_started, kNoWorkerHint);
  return 0;
}

LaunchedPool launch_pool_daemon(const LeftPool& left, const std::string& worker_executable) {
  const ServeOptions& options = left.serve;
  LaunchedPool launched;
  launched.audience = "the next job on this node";
  if (const auto slurm = slurm_allocation()) {
    // The daemon ends with the job (PoolServer watches its steps): refuse here, where the start can
    // say so, rather than leave a daemon that stops at once.
    if (!SlurmJobWatch(slurm->job_id).alive()) {
      throw Error("no warm pool under Slurm job " + slurm->job_id + ": no slurmstepd of it run by root or the slurm account is visible in /proc, so a pool "
                  "could not tell when the job ends");
    }
    launched.audience = "the later steps of Slurm job " + slurm->job_id + " on this node until the job ends";
  }
  const fs::path socket(options.socket_path);
  ensure_private_dir(socket.parent_path(), "Set XDG_RUNTIME_DIR to a folder only you can write");
  const std::string request = socket.string() + ".request-" + std::to_string(::getpid()) + ".json";
  write_private_file(request, request_json(left).dump(), /*durable=*/false);
  const UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const UniqueFd log(::open(pool_log_path(options.socket_path).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));  // appended: two launches at once share it
  int ready_pipe[2] = {-1, -1};
  if (!null || !log || ::pipe2(ready_pipe, O_CLOEXEC) != 0) {
    ::unlink(request.c_str());
    throw Error("cannot open the warm pool's log " + pool_log_path(options.socket_path) + ": " + std::strerror(errno));
  }
  const UniqueFd ready_reader(ready_pipe[0]);
  UniqueFd ready_writer(ready_pipe[1]);
  SpawnRequest spawn;
  spawn.argv = {worker_executable, kPoolDaemonArgument + request};
  // Its own session: a terminal's Ctrl-C to the job does not reach it, and no stdout of the job's stays
  // open in it (a parent reading the job's output to its end would wait for the daemon).
  spawn.new_session = true;
  spawn.descriptors = {{null.get(), 0}, {log.get(), 1}, {log.get(), 2}, {ready_writer.get(), kReadyFd}};
  spawn.unset_environment = {detail::env_name(detail::EnvVar::crash_fd)};
  Spawned started;
  try {
    started = spawn_process(spawn);
  } catch (const Error&) {
    ::unlink(request.c_str());
    throw;
  }
  ready_writer = UniqueFd();  // only the daemon holds it now: its end of the line, or its exit, ends the read
  // It starts the daemon proper and exits at once: reaped here, so no zombie stays with the job.
  // A caller that ignores SIGCHLD has its children reaped by the kernel: waitpid then fails (ECHILD).
  int status = 0;
  while (::waitpid(started.pid, &status, 0) < 0 && errno == EINTR) {
  }
  // A job hears once the pool listens; `serve --detach` once a worker serves (or none started).
  const double wait_s = options.left_by_job ? kListenWaitS : options.pool.start_timeout_s + kListenWaitS;
  const std::string said = read_line_before(ready_reader.get(), wait_s);
  json line = json::parse(said, nullptr, /*allow_exceptions=*/false);
  if (line.is_object() && line.contains("error")) throw error_from_json(line.at("error"), "the warm pool");
  if (!line.is_object() || !line.value("listening", false)) {
    throw Error("the warm pool did not start: it said nothing within " + seconds_text(wait_s) + " (its log: " +
                pool_log_path(options.socket_path) + ")");
  }
  launched.idle_exit_s = line.value("idle_exit_s", 0.0);
  launched.park_after_s = line.value("park_after_s", 0.0);
  launched.parking = parking_from_json(line.value("parking", json()));
  return launched;
}

int pool_daemon_main(const std::string& request_file, bool detached) {
  if (!detached) {
    // The launcher: the daemon proper is its child, and it ends now so that it is nobody's child. The
    // job's ready descriptor goes on to the daemon.
    SpawnRequest spawn;
    spawn.argv = {fs::read_symlink("/proc/self/exe").string(), kPoolDaemonArgument + request_file, kPoolDetachedArgument};
    if (::fcntl(kReadyFd, F_GETFD) >= 0) spawn.descriptors = {{kReadyFd, kReadyFd}};
    try {
      spawn_process(spawn);
    } catch (const std::exception& e) {
      std::cerr << "could not start the warm pool: " << e.what() << std::endl;
      say_once(::fcntl(kReadyFd, F_GETFD) >= 0 ? kReadyFd : -1, {{"error", error_to_json(e)}});
      ::unlink(request_file.c_str());
      return 1;
    }
    return 0;
  }
  const int ready_fd = ::fcntl(kReadyFd, F_GETFD) >= 0 ? kReadyFd : -1;
  if (ready_fd >= 0) ::fcntl(ready_fd, F_SETFD, FD_CLOEXEC);  // the workers it spawns must not hold the job's pipe
  json request;
  try {
    std::ifstream in(request_file);
    request = json::parse(in);
  } catch (const std::exception& e) {
    std::cerr << "the warm pool's request " << request_file << " is unreadable: " << e.what() << std::endl;
    say_once(ready_fd, {{"error", error_to_json(Error("the warm pool's request " + request_file + " is unreadable"))}});
    ::unlink(request_file.c_str());
    return 1;
  }
  ::unlink(request_file.c_str());
  try {
    return serve_until_stopped(left_pool_from_json(request), /*quiet=*/false, ready_fd);
  } catch (const std::exception& e) {
    std::cerr << "the warm pool stopped: " << e.what() << std::endl;
    return 1;
  }
}

void check_served_runtime(const std::string& ort_library) {
  // The runtime the workers will load (the first candidate load_runtime() would take), checked here with
  // where it came from: a daemon hands it to its workers by path, which would then blame the setting.
  for (const auto& candidate : runtime_candidates(ort_library)) {
    if (!candidate.exists && !candidate.explicit_choice) continue;
    check_runtime_candidate(candidate);
    return;
  }
}

std::string take_over_left_pool(const std::string& socket_path, bool quiet) {
  const PoolProbe found = probe_pool(socket_path, 5);
  if (found.kind != PoolProbe::Kind::ours || !found.left_by_job) return "";
  const std::string replaced = fmt::format("the pool a job left on {} (pid {})", socket_path, found.pid);
  const int64_t deadline = deadline_in(kTakeOverWaitS, monotonic_ns());
  bool said = false;
  for (;;) {
    try {
      MessageChannel channel(connect_to_pool(socket_path), "the pool a job left on " + socket_path);
      ask_pool(channel, pool_message::stop, {{"if_idle", true}}, 30);
      break;
    } catch (const Error& e) {
      if (look_at_socket(socket_path, /*follow=*/false) != SocketFound::live) return replaced;  // it ended meanwhile
      if (monotonic_ns() >= deadline) {
        throw Error(replaced + " still serves a job after " + seconds_text(kTakeOverWaitS) + " (" + e.what_failed() + ")",
                    "Start the daemon once its jobs have ended, or stop it (ortfleet pool stop)");
      }
      if (!said && !quiet) std::cerr << replaced << " serves a job: taking it over once no job uses it" << std::endl;
      said = true;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  await_socket_gone(socket_path, 60);
  return replaced;
}

}  // namespace ortfleet::detail

int ortfleet::serve_pool(const ServeOptions& options, bool quiet) {
  detail::check_served_runtime(options.pool.ort_library);
  detail::LeftPool left{options, std::nullopt, false};
  if (left.serve.socket_path.empty()) left.serve.socket_path = default_pool_socket();
  if (const std::string replaced = detail::take_over_left_pool(left.serve.socket_path, quiet); !replaced.empty() && !quiet) {
    std::cerr << "took over " << replaced << std::endl;
  }
  return detail::serve_until_stopped(left, quiet);
}

ortfleet::DetachedPool ortfleet::serve_pool_detached(const ServeOptions& options) {
  detail::check_served_runtime(options.pool.ort_library);
  detail::LeftPool left{options, std::nullopt, false};
  if (left.serve.socket_path.empty()) left.serve.socket_path = default_pool_socket();
  left.serve.socket_path = std::filesystem::absolute(left.serve.socket_path).lexically_normal().string();
  const detail::WorkerRuntime runtime = detail::resolve_worker_runtime(left.serve.pool.worker_executable, left.serve.pool.ort_library);
  left.serve.pool.ort_library = runtime.ort_library;
  left.serve.pool.worker_executable = runtime.executable;
  const std::string replaced = detail::take_over_left_pool(left.serve.socket_path, /*quiet=*/true);
  const detail::LaunchedPool launched = detail::launch_pool_daemon(left, left.serve.pool.worker_executable);
  return {left.serve.socket_path, detail::pool_log_path(left.serve.socket_path), launched.park_after_s, launched.parking, replaced};
}
