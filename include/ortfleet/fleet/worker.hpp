#pragma once
// The worker process of the processes and fleet strategies (the ortfleet-worker executable).

namespace ortfleet {

/// The entry point of the ortfleet-worker executable: serves one device for a Fleet over the socket
/// `channel_fd`. Returns the process exit code.
int run_worker_process(int channel_fd);

}  // namespace ortfleet
