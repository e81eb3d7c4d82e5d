#pragma once
// A warm pool served as a daemon: what `ortfleet serve` runs in the foreground, and what a start
// leaves behind on its node (FleetOptions::auto_pool) so that the next job's start is a pool start:
// `ortfleet-worker --pool-daemon=FILE`, in a session of its own, that exits once nobody used it for
// its idle time. Build tools' daemons are the model: the client starts it, it outlives the client,
// it ends itself when idle. The job that left it hands its own workers over as it ends, sessions
// loaded (pool_client.hpp, hand_over_to_pool), so that the next job finds its model resident.
#include <optional>
#include <string>

#include "fleet/local/local_start.hpp"
#include "ortfleet/fleet/pool_server.hpp"

namespace ortfleet::detail {

/// What a daemon serving a pool left by a job is asked to do besides serving.
struct LeftPool {
  ServeOptions serve;
  /// The model whose cache entry the job's start missed: made in the background (PoolServer::
  /// make_entry_in_background).
  std::optional<LocalStartPlan> make_entry;
  /// The idle exit was not set by the user: the daemon picks it (longer where its workers park, since
  /// a parked pool holds no GPU memory).
  bool default_idle_exit = false;
};

/// Serves `left.serve` until a stop signal (SIGTERM, SIGINT), `ortfleet pool stop`, or (idle_exit_s)
/// until nobody used the pool for that long. Says what it does on stderr (unless `quiet`): the
/// workers, their GPU memory once ready, parking, why it ends. `ready_fd` (>= 0): once it listens (a
/// pool a job left) or once a device's worker serves (`serve`), or it failed to, one line of JSON goes
/// there ({"listening": true, idle_exit_s, park_after_s, parking} or {"error": ...}) and the descriptor
/// is closed. Throws ortfleet::Error, once its workers have settled, when none started: a pool with no
/// worker serves nothing, and stops.
int serve_until_stopped(const LeftPool& left, bool quiet, int ready_fd = -1);

/// Throws ortfleet::Error, saying where the library came from (the setting, ORTFLEET_ORT_LIB, ...), when
/// the ONNX Runtime a served pool's workers would load (`ort_library`, else the search's first) is
/// missing or no whole shared library: `ortfleet serve` fails at once rather than serve with no worker.
void check_served_runtime(const std::string& ort_library);

/// What launch_pool_daemon's pool said once it listened.
struct LaunchedPool {
  std::string audience;  ///< "the next job on this node", or under Slurm "the later steps of Slurm job 123 ..."
  double idle_exit_s = 0;
  double park_after_s = 0;
  ParkingStatus parking;
};

/// Leaves a pool daemon serving `left` behind: returns once it listens (within seconds; never on the
/// path to ready), with what it said. Its output goes to pool_log_path(). Throws ortfleet::Error when it
/// could not start (another program on the socket, a folder it may not use...), or under Slurm when it
/// could not tell when the job ends (no slurmstepd of the job visible in /proc).
LaunchedPool launch_pool_daemon(const LeftPool& left, const std::string& worker_executable);

/// `ortfleet-worker --pool-daemon=FILE`: reads and removes the request FILE, then (unless `detached`)
/// starts itself again detached and returns, so that nobody waits for the daemon; detached, it serves.
int pool_daemon_main(const std::string& request_file, bool detached);
/// That command line, as launch_pool_daemon spawns it and tools/ortfleet/worker_main.cpp reads it.
inline constexpr const char* kPoolDaemonArgument = "--pool-daemon=";
inline constexpr const char* kPoolDetachedArgument = "--detached";

/// Where a daemon serving `socket_path` writes its log: beside the socket.
std::string pool_log_path(const std::string& socket_path);

/// Before a node daemon (`ortfleet serve`, with or without --detach) starts on `socket_path`: a pool a
/// job left there is stopped once no job uses it (waiting at most a few minutes), so that the daemon
/// takes its socket instead of failing, which a unit's Restart=on-failure would repeat. Returns what it
/// replaced, in words ("" when no such pool was there); another `ortfleet serve` there is left alone
/// (the server's own start then says so). Throws ortfleet::Error when that pool's jobs outlast the wait.
std::string take_over_left_pool(const std::string& socket_path, bool quiet);

}  // namespace ortfleet::detail
