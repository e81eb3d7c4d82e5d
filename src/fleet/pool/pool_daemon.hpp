#pragma once
// A warm pool served as a daemon: what `ortfleet serve` runs in the foreground, and what a start
// leaves behind on its node (FleetOptions::auto_pool) so that the next job's start is a pool start:
// `ortfleet-worker --pool-daemon=FILE`, in a session of its own, that exits once nobody used it for
// its idle time. Build tools' daemons are the model: the client starts it, it outlives the client,
// it ends itself when idle.
#include <optional>
#include <string>

#include "fleet/local/local_start.hpp"
#include "ortfleet/fleet/pool_server.hpp"

namespace ortfleet::detail {

/// Serves `options` until a stop signal (SIGTERM, SIGINT), `ortfleet pool stop`, or (idle_exit_s) until
/// nobody used the pool for that long; first, `prepare`'s model is made ready (PoolServer::prepare).
/// Says what it does on stderr (unless `quiet`): the workers, their GPU memory once ready, why it ends.
int serve_until_stopped(const ServeOptions& options, const std::optional<LocalStartPlan>& prepare, bool quiet);

/// Leaves a pool daemon serving `options` (and preparing `prepare`) behind: returns once the daemon
/// runs on its own, without waiting for its workers, and says whom it is left for ("the next job on
/// this node", or under Slurm "the later steps of Slurm job 123 on this node until the job ends").
/// Its output goes to pool_log_path(). Throws ortfleet::Error when it cannot be launched, or under
/// Slurm when it could not tell when the job ends (no slurmstepd of the job visible in /proc).
std::string launch_pool_daemon(const ServeOptions& options, const std::optional<LocalStartPlan>& prepare, const std::string& worker_executable);

/// `ortfleet-worker --pool-daemon=FILE`: reads and removes the request FILE, then (unless `detached`)
/// starts itself again detached and returns, so that nobody waits for the daemon; detached, it serves.
int pool_daemon_main(const std::string& request_file, bool detached);

/// Where a daemon serving `socket_path` writes its log: beside the socket.
std::string pool_log_path(const std::string& socket_path);

}  // namespace ortfleet::detail
