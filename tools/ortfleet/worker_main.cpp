// ortfleet-worker: one device's sessions in their own process, driven by a Fleet or a worker pool over a
// socket.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "ortfleet/fleet/worker_executable.hpp"

int main(int argc, char** argv) {
  int fd = -1;
  std::string device = "cpu";
  bool narrowed = false;
  std::string pool_daemon;
  bool detached = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--channel-fd=", 13) == 0) fd = std::atoi(argv[i] + 13);
    else if (std::strncmp(argv[i], "--device=", 9) == 0) device = argv[i] + 9;
    else if (std::strcmp(argv[i], "--narrowed") == 0) narrowed = true;
    else if (std::strncmp(argv[i], "--pool-daemon=", 14) == 0) pool_daemon = argv[i] + 14;
    else if (std::strcmp(argv[i], "--detached") == 0) detached = true;
  }
  if (!pool_daemon.empty()) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("ortfleet-pool"));
    spdlog::set_pattern("%Y-%m-%d %H:%M:%S %^%l%$: [pool %P] %v");
    return ortfleet::run_pool_daemon(pool_daemon, detached);
  }
  if (fd < 0) {
    std::cerr << "ortfleet-worker is started by ortfleet (a Fleet, a worker pool or `ortfleet serve`), not by hand\n";
    return 2;
  }
  // Logs go to stderr, as the parent's do: stdout may carry a command's result (bench, --json).
  auto logger = spdlog::stderr_color_mt("ortfleet-worker");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%^%l%$: [worker %P] %v");
  return ortfleet::run_worker_process(fd, device, narrowed);
}
