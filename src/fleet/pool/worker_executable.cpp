#include "ortfleet/fleet/worker_executable.hpp"

#include "fleet/pool/pool_daemon.hpp"
#include "fleet/worker/worker_server.hpp"

int ortfleet::run_worker_process(int channel_fd, const std::string& device, bool narrowed) {
  return detail::worker_main(channel_fd, Device::parse(device), narrowed);
}

int ortfleet::run_pool_daemon(const std::string& request_file, bool detached) { return detail::pool_daemon_main(request_file, detached); }
