#pragma once
// The worker's side of the worker protocol (fleet/worker/worker_protocol.hpp): the ortfleet-worker process
// serves one device's sessions to its parent (fleet/worker/worker_channel.hpp) and to the channels its parent
// attaches (a pool server's clients), one thread a channel.
#include "ortfleet/engine/devices.hpp"

namespace ortfleet::detail {

/// Serves requests on `channel_fd` until told to stop, then exits the process with its exit code.
int worker_main(int channel_fd, const Device& device, bool narrowed);

}  // namespace ortfleet::detail
