#pragma once
// Worker processes: one per device for the processes and fleet strategies. The parent spawns the
// ortfleet-worker executable with one end of a socket pair; the protocol is JSON messages:
//   parent -> worker  {"op":"start", model, device, mode, config, ...}   -> {"event":"ready"|"failed", ...}
//   parent -> worker  {"op":"run", inputs} + shared-memory fd            -> {"event":"outputs"|"failed", ...} + fd
//   parent -> worker  {"op":"stop"}                                      -> the worker exits
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fleet/local_start.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {

/// The worker executable: explicit, $ORTFLEET_WORKER, or ortfleet-worker next to this binary
/// (or in its bin/ or ../bin/ folders). Throws ortfleet::Error naming where it looked.
std::string find_worker_executable(const std::string& explicit_path);

class WorkerProcess {
 public:
  /// Spawns the worker (posix_spawn; fork would copy a parent that may hold CUDA or Python state).
  WorkerProcess(const std::string& executable, const Device& device);
  ~WorkerProcess();  ///< stops the worker
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  int pid() const { return pid_; }
  int64_t spawn_ns() const { return spawn_ns_; }

  /// What a worker reports once its session is ready.
  struct Ready {
    DeviceStatus status;
    std::vector<TensorSpec> inputs;
    std::vector<TensorSpec> outputs;
    std::vector<TimelineEvent> timeline;  ///< every phase of the worker process, on its device's lane
  };
  /// Sends the start request and blocks until the worker is ready or failed (throws ortfleet::Error
  /// with the worker's error, or how it died).
  Ready start(const LocalStartPlan& plan);
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  void stop();

 private:
  [[noreturn]] void died(const std::string& doing);
  /// The reply's body when its event is `expected`; throws the worker's error otherwise.
  Message expect(std::optional<Message> reply, const char* expected, const std::string& doing);

  Device device_;
  int pid_ = -1;
  int64_t spawn_ns_ = 0;
  std::unique_ptr<MessageChannel> channel_;
  std::shared_ptr<SharedBuffer> input_buffer_;  // ours, reused while big enough
  ReceivedBuffer outputs_;                       // the worker's output buffer, mapped once
  std::mutex mutex_;  // one request at a time
};

/// The worker's side: serves requests on `channel_fd` until told to stop. Returns the exit code.
int worker_main(int channel_fd);

}  // namespace ortfleet::detail
