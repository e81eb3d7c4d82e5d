// ortfleet-worker: one device's session in its own process, driven by a Fleet over a socket.
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "ortfleet/fleet/worker.hpp"

int main(int argc, char** argv) {
  int fd = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--channel-fd=", 13) == 0) fd = std::atoi(argv[i] + 13);
  }
  if (fd < 0) {
    std::cerr << "ortfleet-worker is started by ortfleet's Fleet (strategies processes and fleet), not by hand\n";
    return 2;
  }
  spdlog::set_pattern("%^%l%$: [worker %P] %v");
  return ortfleet::run_worker_process(fd);
}
