#pragma once
// The pool server's protocol: what a pool's clients ask it (ortfleet/fleet/pool_server.hpp), in the words
// of the worker protocol (fleet/worker/worker_protocol.hpp: MessageKind, request_of, answer_to), on a
// Unix socket, one request at a time per connection:
//   {"op":"status", brief}              -> {"event":"status", ortfleet_pool, devices, ...}   (brief: its devices
//                                          and runtime only, without asking any worker)
//   {"op":"evict"}                      -> {"event":"evicted", count}   every session nobody holds, every worker
//   {"op":"stop", if_idle}              -> {"event":"stopping"}, and the server stops with its workers (if_idle:
//                                          only while no job uses it; refused otherwise)
//   {"op":"open", plan, timeout_s}      -> {"event":"opened", devices, log} + a channel per started device (log:
//                                          where the server's messages go, for a client to point at)
//   {"op":"hand_over", pid, device, visible_devices, model} + 2 fds
//                                       -> {"event":"taken", taken}   a job's own worker, sessions loaded,
//                                          becomes the pool's (its control channel and crash pipe)
//   {"op":"worker_killed", pid, what} -> {"event":"noted"}   a job is about to end one of the pool's workers
//                                          (its run or start missed its deadline): logged as what it was
//   {"op":"restore_ahead", devices, model} -> {"event":"restoring", devices}   a job's client will use these
//                                          devices (and model): their parked workers are restored now, in the
//                                          background, while the job starts (answered before any of it)
// Any request may be answered {"event":"failed", error} instead; a client the server refuses (another
// user) gets that answer before the connection closes. The server's dispatch table (pool_server.cpp)
// holds one row per request here; pool_requests.hpp reads what a client sent, field by field.
#include "fleet/worker/worker_protocol.hpp"

namespace ortfleet::detail::pool_message {
inline constexpr MessageKind status = message::status;  ///< the pool's status, or (brief) what a start asks first
inline constexpr MessageKind evict = message::evict;    ///< every worker's sessions nobody holds
inline constexpr MessageKind stop = message::stop;      ///< the server itself
inline constexpr MessageKind open{"open", "opened"};
inline constexpr MessageKind hand_over{"hand_over", "taken"};
inline constexpr MessageKind worker_killed{"worker_killed", "noted"};
inline constexpr MessageKind restore_ahead{"restore_ahead", "restoring"};
}  // namespace ortfleet::detail::pool_message
