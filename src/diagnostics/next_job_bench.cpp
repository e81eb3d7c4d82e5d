#include "diagnostics/next_job_bench.hpp"

#include <sys/wait.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "diagnostics/bench_rows.hpp"
#include "diagnostics/cold_start.hpp"
#include "fleet/pool/worker_parking.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/units.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "process/spawn.hpp"

namespace ortfleet::detail {
namespace {
using nlohmann::json;

// Short labels, so that a table row keeps one line; next_job_notes says what each found.
constexpr const char* kFirst = "first job, leaves a pool";
constexpr const char* kNext = "next job";
constexpr const char* kParked = "next job, parked pool";
constexpr const char* kParkedNew = "new session, parked pool";
constexpr const char* kDaemon = "new model, node daemon";
constexpr const char* kDaemonRestarted = "first job after the daemon starts";
/// How long the pool a round's first job leaves waits idle before its workers park: short, so that a
/// round does not wait long, and long enough that the next job, right after the first, finds them up.
constexpr double kParkAfterS = 2;
constexpr double kParkedWaitS = 180;  // the pool makes the first job's cache entry before it is idle

BenchRow row(const char* label, const char* warm, const std::vector<Device>& devices) {
  BenchRow r;
  r.label = label;
  r.family = "ortfleet";
  r.strategy = "auto";
  r.device_count = static_cast<int>(devices.size());
  r.warm = warm;
  if (std::string(label) == kFirst) r.model_cache = "empty";
  return r;
}

/// Whether every GPU worker of the pool on `socket` is parked, waiting at most `timeout_s`.
bool await_parked(const std::string& socket, double timeout_s, const std::stop_token& stop) {
  const int64_t deadline = deadline_in(timeout_s, monotonic_ns());
  while (monotonic_ns() < deadline && !stop.stop_requested()) {
    try {
      const json status = json::parse(pool_status(socket, 10));
      const auto& workers = status.at("devices");
      const bool all = !workers.empty() && std::all_of(workers.begin(), workers.end(), [](const json& w) {
        return w.value("device", "").rfind("cuda", 0) != 0 || w.value("parked", false);
      });
      if (all) return true;
    } catch (const std::exception&) {
      return false;  // the pool is gone
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

/// The pool a round's first job leaves: stopped as the round ends, however it ends (a stopped bench
/// must leave no pool behind), before its runtime folder goes.
struct PoolOfTheRound {
  std::string socket;
  explicit PoolOfTheRound(std::string path) : socket(std::move(path)) {}
  PoolOfTheRound(const PoolOfTheRound&) = delete;
  PoolOfTheRound& operator=(const PoolOfTheRound&) = delete;
  ~PoolOfTheRound() {
    try {
      pool_stop(socket);
    } catch (const std::exception&) {
      // no pool was left (the first job failed)
    }
  }
};

/// Whether the daemon on `socket` has made what it makes at start (its preloaded models) and no cache
/// entry is in the making.
bool settled(const json& status) {
  return status.value("preload", json::object()).value("state", "done") == "done" && status.value("cache_fills", json::array()).empty();
}

/// Waits at most `timeout_s` until the daemon on `socket` is settled and, where its workers park,
/// parked: what a node whose daemon started (or served its last job) holds before the next job.
bool await_settled(const std::string& socket, bool parks, double timeout_s, const std::stop_token& stop) {
  const int64_t deadline = deadline_in(timeout_s, monotonic_ns());
  while (monotonic_ns() < deadline && !stop.stop_requested()) {
    const json status_now = json::parse(pool_status(socket, 10));
    const auto& workers = status_now.at("devices");
    const bool up = !workers.empty() && std::none_of(workers.begin(), workers.end(), [](const json& w) { return w.value("state", "") == "starting"; });
    if (up && settled(status_now) && (!parks || await_parked(socket, 0.2, stop))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

/// `ortfleet serve --detach` on the default socket of `runtime_dir`, as a node daemon (a systemd unit)
/// runs it before any job: returns once it listens, its workers up, what it makes at start made (the
/// models it served before it last stopped) and, where they can, parked. Throws ortfleet::Error when it
/// does not come up.
void start_node_daemon(const std::string& ortfleet, const BenchOptions& o, const std::map<std::string, std::string>& environment,
                       const std::string& socket, bool parks) {
  SpawnRequest spawn;
  spawn.argv = {ortfleet, "-q", "serve", "--detach", "--devices", to_string(o.devices), "--park-after", fmt::format("{:g}", kParkAfterS)};
  if (!o.ort_library.empty()) spawn.argv.insert(spawn.argv.begin() + 1, {"--ort-lib", o.ort_library});
  spawn.environment = environment;
  const Spawned started = spawn_process(spawn);
  int status = 0;
  while (::waitpid(started.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw Error("the node daemon did not start: `ortfleet serve --detach` " + describe_exit_status(status));
  // Its workers up (primed), its models made, then parked where they can park: what a node holds before
  // its next job.
  if (!await_settled(socket, parks, kParkedWaitS, o.stop)) {
    throw Error(fmt::format("the node daemon's workers were not {} within {:g} s", parks ? "parked" : "up", kParkedWaitS));
  }
}

/// One job of a round; its wall time into `r` when the round is timed, its failure as the row's error.
bool run_job(ColdStartRequest& request, BenchRow& r, bool timed) {
  if (!r.error.empty()) return false;
  const ColdStart result = run_cold_start(request);
  throw_if_stopped(request.stop);
  if (!result.ok()) {
    r.error = result.error;
    return false;
  }
  if (timed) add_timed_round(r, *result.report);
  return true;
}

}  // namespace

NextJobRows run_next_job_rows(const BenchOptions& o, const std::string& ortfleet, int rounds) {
  NextJobRows out;
  std::optional<std::string> no_parking;
  for (const auto& d : o.devices) {
    if (!no_parking) no_parking = WorkerParking::unavailable(d);
  }
  std::vector<BenchRow> rows = {row(kFirst, "", o.devices), row(kNext, "next job", o.devices), row(kDaemon, "node daemon", o.devices),
                                row(kDaemonRestarted, "node daemon", o.devices)};
  constexpr size_t kParkedRow = 4;
  if (no_parking) {
    out.skipped.push_back(std::string(kParked) + ", " + kParkedNew + ": the pool's workers do not park here (" + *no_parking + ")");
  } else {
    rows.push_back(row(kParked, "parked", o.devices));
    rows.push_back(row(kParkedNew, "parked", o.devices));
  }
  // Taken once every row is in: a row added after would move them.
  BenchRow& daemon_new = rows[2];
  daemon_new.model_cache = "empty";
  BenchRow& daemon_restarted = rows[3];  // its cache holds the entry the daemon made after the job before it
  const int total = o.warmup_rounds + rounds;
  for (int round = 0; round < total; ++round) {
    const bool timed = round >= o.warmup_rounds;
    if (o.progress) o.progress(fmt::format("{} {}/{}: the next job", timed ? "round" : "untimed round", timed ? round - o.warmup_rounds + 1 : round + 1,
                                           timed ? rounds : o.warmup_rounds));
    // A node of its own each round: a fresh runtime folder (the pool's socket) and an empty cache.
    const PrivateDir runtime = PrivateDir::temporary("ortfleet-bench-next-job");
    const PrivateDir cache = PrivateDir::temporary("ortfleet-bench-next-job-cache");
    const std::string socket = default_pool_socket_in(runtime.path().string());
    const PoolOfTheRound pool{socket};  // stopped when the round ends, also when it is stopped midway
    ColdStartRequest request;
    request.model = o.model;
    request.devices = o.devices;
    request.strategy = "auto";
    request.ortfleet_executable = ortfleet;
    request.ort_library = o.ort_library;
    request.config = o.config;
    request.config.warm_pool.idle_exit_s = kParkedWaitS * 2;
    request.config.warm_pool.park_after_s = kParkAfterS;
    request.timeout_s = o.timeout_s;
    request.stop = o.stop;
    request.environment = {{"XDG_RUNTIME_DIR", runtime.path().string()}, {env_name(EnvVar::cache), cache.path().string()},
                           {env_name(EnvVar::auto_pool), "1"}};
    {
      // A node whose daemon (ortfleet serve, as its systemd unit runs it) started, primed and parked
      // before any job: the first job of a model it never saw, on an empty cache.
      const PrivateDir daemon_runtime = PrivateDir::temporary("ortfleet-bench-node-daemon");
      const PrivateDir daemon_cache = PrivateDir::temporary("ortfleet-bench-node-daemon-cache");
      const PoolOfTheRound daemon(default_pool_socket_in(daemon_runtime.path().string()));
      ColdStartRequest on_daemon = request;
      on_daemon.environment = {{"XDG_RUNTIME_DIR", daemon_runtime.path().string()}, {env_name(EnvVar::cache), daemon_cache.path().string()},
                               {env_name(EnvVar::auto_pool), "1"}};
      BenchRow* failing = &daemon_new;  // the row a failure below belongs to
      try {
        start_node_daemon(ortfleet, o, on_daemon.environment, daemon.socket, !no_parking);
        if (run_job(on_daemon, daemon_new, timed)) {
          failing = &daemon_restarted;
          // The daemon makes the job's cache entry and remembers what it served. Stopped and started
          // again (a reboot, a unit's restart), it makes that model resident and parks before any job:
          // the first job after it starts.
          if (!await_settled(daemon.socket, !no_parking, kParkedWaitS, o.stop)) {
            throw Error(fmt::format("the node daemon did not make the model's cache entry within {:g} s", kParkedWaitS));
          }
          pool_stop(daemon.socket);
          start_node_daemon(ortfleet, o, on_daemon.environment, daemon.socket, !no_parking);
          run_job(on_daemon, daemon_restarted, timed);
        }
      } catch (const std::exception& e) {
        failing->error = Error::from(e).what_failed();
      }
      if (!daemon_new.error.empty() && daemon_restarted.error.empty()) {
        daemon_restarted.error = fmt::format("not run: the job before it ({}) failed: {}", kDaemon, daemon_new.error);
      }
    }
    if (run_job(request, rows[0], timed) && run_job(request, rows[1], timed) && rows.size() > kParkedRow) {
      if (!await_parked(socket, kParkedWaitS, o.stop)) rows[kParkedRow].error = fmt::format("the pool did not park within {:g} s", kParkedWaitS);
      if (run_job(request, rows[kParkedRow], timed)) {
        pool_evict(socket);
        if (!await_parked(socket, kParkedWaitS, o.stop)) rows[kParkedRow + 1].error = fmt::format("the pool did not park within {:g} s", kParkedWaitS);
        run_job(request, rows[kParkedRow + 1], timed);
      }
    }
  }
  // A row after a failed one never ran: it says which job failed, and why.
  std::string failed;
  for (auto& r : rows) {
    // The node daemon's jobs run on a node of their own, before the others.
    const bool own_round = r.label == kDaemon || r.label == kDaemonRestarted;
    if (r.wall_ms.empty() && r.error.empty() && !failed.empty() && !own_round) r.error = failed;
    if (!r.error.empty() && failed.empty() && !own_round) failed = fmt::format("not run: the job before it ({}) failed: {}", r.label, r.error);
    fill_times(r);
    out.rows.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> next_job_notes(const std::vector<BenchRow>& rows) {
  const auto find = [&](const std::string& label) { return ran_row(rows, label); };
  const BenchRow* first = find(kFirst);
  const BenchRow* plain = find("python (1 device)");
  if (plain == nullptr) plain = find("python sequential");
  if (plain == nullptr) plain = find("fleet, no model cache");
  std::vector<std::string> notes;
  if (first == nullptr) return notes;
  notes.push_back(fmt::format("{}: {}, a node's first job on an empty cache; it leaves a warm pool behind as it ends, with its workers "
                              "and its model loaded, for the jobs after it",
                              kFirst, duration_text(first->mean_ms)));
  // What each row's job found on the pool the first job left.
  const std::pair<const char*, const char*> found[] = {
      {kNext, "right after the first, it found the first job's workers, its model loaded"},
      {kParked, "it found the workers parked (no GPU memory held) and restored on request, the model resident"},
      {kParkedNew, "after `pool evict`, a parked worker restored on request, the session made anew"},
      {kDaemon, "on a node whose daemon started, primed and parked before any job, the model new to it and the cache empty: the "
                "daemon's primed worker restored, the session made"},
      {kDaemonRestarted, "after the daemon that served that job was stopped and started again (a reboot, a unit's restart): it made the "
                         "model it served resident from its cache entry and parked before any job asked"},
  };
  for (const auto& [label, what] : found) {
    const BenchRow* r = find(label);
    if (r == nullptr) continue;
    // Two significant digits: a resident job is a few ms against seconds, and 0.00x would say nothing.
    std::string against = fmt::format("{:.2f}x the first job ({})", r->mean_ms / first->mean_ms, duration_text(first->mean_ms));
    if (plain != nullptr) against += fmt::format(", {:.2f}x {} ({})", r->mean_ms / plain->mean_ms, plain->label, duration_text(plain->mean_ms));
    notes.push_back(fmt::format("{}: {}, {}; {}", label, duration_text(r->mean_ms), against, what));
  }
  return notes;
}

}  // namespace ortfleet::detail
