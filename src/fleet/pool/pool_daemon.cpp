#include "fleet/pool/pool_daemon.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <chrono>
#include <thread>

#include "base/private_dir.hpp"
#include "base/slurm.hpp"
#include "base/unique_fd.hpp"
#include "fleet/worker/wire.hpp"
#include "ortfleet/fleet/worker.hpp"
#include "ortfleet/base/error.hpp"
#include "process/spawn.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kListenWaitSteps = 250;  // of 20 ms: 5 s at most

std::string gigabytes(uint64_t bytes) { return fmt::format("{:.2f} GB", static_cast<double>(bytes) / 1e9); }

/// One line per worker, and the device memory the pool holds while idle (GPU workers: contexts,
/// primed libraries, spare workers).
void announce(PoolServer& server, bool ready) {
  const json status = json::parse(server.pool().status_json());
  std::map<std::string, uint64_t> memory;
  for (const auto& d : status.at("devices")) memory[d.value("device", "")] = std::max(memory[d.value("device", "")], d.value("memory_bytes", uint64_t{0}));
  for (const auto& w : server.pool().status()) {
    std::cerr << fmt::format("  {}: {} (worker pid {}{}{})\n", w.device.to_string(), w.state, w.pid,
                             w.visible_devices.empty() ? "" : ", CUDA_VISIBLE_DEVICES=" + w.visible_devices, w.error.empty() ? "" : ": " + w.error);
  }
  std::string held;
  for (const auto& [device, bytes] : memory) {
    if (device.rfind("cuda:", 0) == 0) held += fmt::format("{}{} {}", held.empty() ? "" : ", ", device, gigabytes(bytes));
  }
  std::cerr << (ready ? "pool ready; " : "pool started with failures; ") << "serving on " << server.socket_path();
  if (!held.empty()) std::cerr << "; GPU memory in use while idle: " << held;
  std::cerr << " (SIGTERM, Ctrl-C or `ortfleet pool stop` stops it)" << std::endl;
}

json request_json(const ServeOptions& o, const std::optional<LocalStartPlan>& prepare) {
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
          {"idle_exit_s", o.idle_exit_s},
          {"prepare", prepare ? plan_to_json(*prepare) : json(nullptr)}};
}

}  // namespace

std::string pool_log_path(const std::string& socket_path) { return socket_path + ".log"; }

int serve_until_stopped(const ServeOptions& options, const std::optional<LocalStartPlan>& prepare, bool quiet) {
  // SIGTERM and SIGINT are taken by one thread that stops the server: blocked here, before any other
  // thread exists, so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  PoolServer server(options);  // refuses a socket it cannot take before a word is said
  if (!quiet) std::cerr << "starting workers for " << to_string(options.pool.devices) << " ..." << std::endl;
  std::thread stopper([&server, stop_signals] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    server.stop();
  });
  std::thread announcer([&server, quiet] {
    const bool ready = server.pool().wait(server.pool().options().start_timeout_s);
    if (!quiet) announce(server, ready);
  });
  if (prepare) server.prepare(*prepare);
  if (!quiet && options.idle_exit_s > 0) {
    std::cerr << fmt::format("it exits after {:g} s with nobody attached", options.idle_exit_s) << std::endl;
  }
  server.serve();
  announcer.join();
  // The stopper ends with the signal that stopped the server; a stop for another reason sends it one.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  if (!quiet) std::cerr << "stopping the workers and removing " << server.socket_path() << std::endl;
  return 0;
}

std::string launch_pool_daemon(const ServeOptions& options, const std::optional<LocalStartPlan>& prepare, const std::string& worker_executable) {
  std::string audience = "the next job on this node";
  if (const auto slurm = slurm_allocation()) {
    // The daemon ends with the job (PoolServer watches its steps): refuse here, where the start can
    // say so, rather than leave a daemon that stops at once.
    if (!SlurmJobWatch(slurm->job_id).alive()) {
      throw Error("no warm pool under Slurm job " + slurm->job_id + ": none of its slurmstepd processes is visible in /proc, so a pool "
                  "could not tell when the job ends");
    }
    audience = "the later steps of Slurm job " + slurm->job_id + " on this node until the job ends";
  }
  const fs::path socket(options.socket_path);
  ensure_private_dir(socket.parent_path(), "Set XDG_RUNTIME_DIR to a folder only you can write");
  const std::string request = socket.string() + ".request-" + std::to_string(::getpid()) + ".json";
  write_private_file(request, request_json(options, prepare).dump(), /*durable=*/false);
  const UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const UniqueFd log(::open(pool_log_path(options.socket_path).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));  // appended: two launches at once share it
  if (!null || !log) {
    ::unlink(request.c_str());
    throw Error("cannot open the warm pool's log " + pool_log_path(options.socket_path) + ": " + std::strerror(errno));
  }
  SpawnRequest spawn;
  spawn.argv = {worker_executable, "--pool-daemon=" + request};
  // Its own session: a terminal's Ctrl-C to the job does not reach it, and no stdout of the job's stays
  // open in it (a parent reading the job's output to its end would wait for the daemon).
  spawn.new_session = true;
  spawn.descriptors = {{null.get(), 0}, {log.get(), 1}, {log.get(), 2}};
  spawn.unset_environment = {"ORTFLEET_CRASH_FD"};
  Spawned launched;
  try {
    launched = spawn_process(spawn);
  } catch (const Error&) {
    ::unlink(request.c_str());
    throw;
  }
  // It starts the daemon proper and exits at once: reaped here, so no zombie stays with the job.
  // A caller that ignores SIGCHLD has its children reaped by the kernel: waitpid then fails (ECHILD)
  // and only the socket can tell whether the daemon came up.
  int status = 0;
  int reaped = -1;
  while ((reaped = ::waitpid(launched.pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (reaped >= 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    throw Error("the warm pool did not start: its launcher " + describe_exit_status(status) + " (its log: " + pool_log_path(options.socket_path) + ")");
  }
  // Until it listens (a fraction of a second; never on the path to ready): the job's next step, which
  // may follow at once, then finds it rather than start cold beside it.
  std::error_code ec;
  for (int i = 0; i < kListenWaitSteps && !fs::is_socket(options.socket_path, ec); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (reaped < 0 && !fs::is_socket(options.socket_path, ec)) {
    throw Error("the warm pool did not start: its launcher's outcome is unknown (" + std::string(std::strerror(errno)) +
                ") and nothing listens on " + options.socket_path + " (its log: " + pool_log_path(options.socket_path) + ")");
  }
  return audience;
}

int pool_daemon_main(const std::string& request_file, bool detached) {
  if (!detached) {
    // The launcher: the daemon proper is its child, and it ends now so that it is nobody's child.
    SpawnRequest spawn;
    spawn.argv = {fs::read_symlink("/proc/self/exe").string(), "--pool-daemon=" + request_file, "--detached"};
    try {
      spawn_process(spawn);
    } catch (const std::exception& e) {
      std::cerr << "could not start the warm pool: " << e.what() << std::endl;
      ::unlink(request_file.c_str());
      return 1;
    }
    return 0;
  }
  json request;
  try {
    std::ifstream in(request_file);
    request = json::parse(in);
  } catch (const std::exception& e) {
    std::cerr << "the warm pool's request " << request_file << " is unreadable: " << e.what() << std::endl;
    ::unlink(request_file.c_str());
    return 1;
  }
  ::unlink(request_file.c_str());
  try {
    ServeOptions options;
    options.socket_path = request.at("socket").get<std::string>();
    for (const auto& d : request.at("devices")) options.pool.devices.push_back(Device::parse(d.get<std::string>()));
    options.pool.ort_library = request.at("ort_library").get<std::string>();
    options.pool.worker_executable = request.value("worker_executable", "");
    options.pool.config = RunConfig::from_json(request.at("config").dump(), "the warm pool's request");
    options.pool.narrow_workers = request.value("narrow_workers", true);
    options.pool.prime_libraries = request.value("prime_libraries", true);
    options.pool.isolate_new_models = request.value("isolate_new_models", true);
    options.idle_exit_s = request.value("idle_exit_s", 0.0);
    std::optional<LocalStartPlan> prepare;
    if (!request.at("prepare").is_null()) prepare = plan_from_json(request.at("prepare"));
    return serve_until_stopped(options, prepare, /*quiet=*/false);
  } catch (const std::exception& e) {
    std::cerr << "the warm pool stopped: " << e.what() << std::endl;
    return 1;
  }
}

}  // namespace ortfleet::detail

int ortfleet::serve_pool(const ServeOptions& options, bool quiet) { return detail::serve_until_stopped(options, std::nullopt, quiet); }
int ortfleet::run_pool_daemon(const std::string& request_file, bool detached) { return detail::pool_daemon_main(request_file, detached); }
