// ortfleet-worker: one device's sessions in their own process, driven by a Fleet or a worker pool over a
// socket.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "fleet/pool/pool_daemon.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "fleet/worker/worker_server.hpp"
#include "setting_words.hpp"

int main(int argc, char** argv) {
  int fd = -1;
  std::string device = "cpu";
  bool narrowed = false;
  std::string pool_daemon;
  bool detached = false;
  using namespace ortfleet::detail;
  // The value of argument `arg` when it starts with `prefix` ("--device=cuda:1"), else null.
  const auto value_of = [](const char* arg, const char* prefix) -> const char* {
    return std::strncmp(arg, prefix, std::strlen(prefix)) == 0 ? arg + std::strlen(prefix) : nullptr;
  };
  for (int i = 1; i < argc; ++i) {
    if (const char* v = value_of(argv[i], kWorkerChannelFdArgument)) fd = std::atoi(v);
    else if (const char* d = value_of(argv[i], kWorkerDeviceArgument)) device = d;
    else if (std::strcmp(argv[i], kWorkerNarrowedArgument) == 0) narrowed = true;
    else if (const char* r = value_of(argv[i], kPoolDaemonArgument)) pool_daemon = r;
    else if (std::strcmp(argv[i], kPoolDetachedArgument) == 0) detached = true;
  }
  if (!pool_daemon.empty()) {
    // Its log is the command line's: settings said as flags there too, in the records and in what it
    // prints (the workers' errors, as `ortfleet serve` in the foreground says them).
    ortfleet::cli::say_settings_as_flags();
    spdlog::set_default_logger(ortfleet::cli::logger_in_flags("ortfleet-pool"));
    spdlog::set_pattern("%Y-%m-%d %H:%M:%S %^%l%$: [pool %P] %v");
    return pool_daemon_main(pool_daemon, detached);
  }
  if (fd < 0) {
    std::cerr << "ortfleet-worker is started by ortfleet (a Fleet, a worker pool or `ortfleet serve`), not by hand\n";
    return 2;
  }
  // Logs go to stderr, as the parent's do: stdout may carry a command's result (bench, --json).
  spdlog::set_default_logger(ortfleet::cli::logger_in_flags("ortfleet-worker"));
  spdlog::set_pattern("%^%l%$: [worker %P] %v");
  return worker_main(fd, ortfleet::Device::parse(device), narrowed);
}
