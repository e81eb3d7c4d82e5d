#pragma once
// The entry points of the ortfleet-worker executable (tools/ortfleet/worker_main.cpp): a worker process of
// the processes and fleet strategies, or the warm pool a start leaves behind (src/fleet/pool/worker_executable.cpp).
#include <string>

namespace ortfleet {

/// The entry point of the ortfleet-worker executable: serves one device (as the fleet names it,
/// "cuda:1") over the socket `channel_fd`. `narrowed`: CUDA_VISIBLE_DEVICES shows this process only
/// that GPU, as its CUDA ordinal 0. Returns the process exit code.
int run_worker_process(int channel_fd, const std::string& device, bool narrowed);

/// The same executable as the warm pool a start leaves behind (`--pool-daemon=FILE`): serves the pool
/// FILE describes until it has been idle for its time. `detached`: already the daemon proper.
int run_pool_daemon(const std::string& request_file, bool detached);

}  // namespace ortfleet
