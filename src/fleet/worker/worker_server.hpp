#pragma once
// The worker's side of the worker protocol (fleet/worker/worker_protocol.hpp): the ortfleet-worker process
// serves one device's sessions (fleet/worker/worker_sessions.hpp) to its parent (fleet/worker/worker_channel.hpp)
// and to the channels its parent attaches (a pool server's clients), one thread a channel, each request
// routed by its kind through one table (worker_server.cpp: ChannelServer::routes).
#include <cstdint>
#include <memory>

#include "ortfleet/engine/devices.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {

class WorkerSessions;
struct AttachedChannels;

/// A worker's serving, in the process that runs it: worker_main's, or a test's.
class WorkerServer {
 public:
  /// `main_ns`: when the process's main() began, where its first timeline starts.
  /// `origin`: the folder the process was started in (WorkerSessions).
  WorkerServer(Device device, int64_t main_ns, std::string origin = {});
  /// Waits for the channels attached to it to close first.
  ~WorkerServer();
  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

  /// Serves the control channel (its parent's) until it closes or a stop request comes.
  void serve(MessageChannel& control);
  /// Lets go of every session now.
  void clear();

 private:
  std::unique_ptr<WorkerSessions> sessions_;
  std::unique_ptr<AttachedChannels> attached_;
};

/// Serves requests on `channel_fd` until told to stop, then exits the process with its exit code.
int worker_main(int channel_fd, const Device& device, bool narrowed);

}  // namespace ortfleet::detail
