#pragma once
// A model started on a warm pool's worker for one device: the one path both a pool server's clients
// (pool_server.cpp) and a Fleet holding a pool in its own process (start/fleet.cpp) take.
#include <memory>
#include <nlohmann/json.hpp>

#include "fleet/local/local_start.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/fleet/worker_pool.hpp"

namespace ortfleet::detail {

struct PoolDeviceStart {
  std::shared_ptr<WorkerProcess> worker;   ///< the pool's worker (kept alive while the channel is used)
  std::unique_ptr<WorkerChannel> channel;  ///< a channel of the caller's own: closing it lets go of the session
  nlohmann::json ready;                    ///< the worker's ready reply (ready_from_json reads it)
};

/// Starts `plan` (its one device) on the worker `pool` picks for it (WorkerPool::worker_for: restored
/// first if parked), on a new channel to that worker, and tells the pool how it went. Throws
/// ortfleet::Error, with the device, when it failed; nothing of a failed start stays running.
PoolDeviceStart start_on_pool(WorkerPool& pool, LocalStartPlan plan, double timeout_s);

}  // namespace ortfleet::detail
