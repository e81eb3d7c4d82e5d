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

/// "7200 s", "0.5 s": a timeout as the errors show it.
std::string seconds_text(double seconds);

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
  /// Sends the start request and waits until the worker is ready or failed, at most `timeout_s`: a
  /// worker that has not answered by then is killed. Throws ortfleet::Error with the worker's error,
  /// how it died, or that it did not answer in time.
  Ready start(const LocalStartPlan& plan, double timeout_s);
  /// One inference; a worker that does not answer within `timeout_s` is killed (and the error says so).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, double timeout_s);
  void stop();
  /// False once the worker has died or was killed: every later request fails.
  bool alive() const;

 private:
  [[noreturn]] void died(const std::string& doing);
  /// Kills a worker that did not answer in time; throws `why`.
  [[noreturn]] void unresponsive(const Error& why);
  /// The reply's body when its event is `expected`; throws the worker's error, how it died, or
  /// `timed_out` when the deadline passed first.
  Message expect(Received reply, const char* expected, const std::string& doing, const std::string& timed_out,
                 const std::string& timeout_hint);

  Device device_;
  int pid_ = -1;
  std::string gone_;  // why the worker is no longer there, once it is not
  int64_t spawn_ns_ = 0;
  std::unique_ptr<MessageChannel> channel_;
  std::shared_ptr<SharedBuffer> input_buffer_;  // ours, reused while big enough
  ReceivedBuffer outputs_;                       // the worker's output buffer, mapped once
  mutable std::mutex mutex_;  // one request at a time
};

/// The worker's side: serves requests on `channel_fd` until told to stop. Returns the exit code.
int worker_main(int channel_fd);

/// For tests of the start-up deadline: when set to "DEVICE=SECONDS" (e.g. "cpu:1=30"), the worker of
/// that device sleeps that long before it handles its start request, so that a test can stop it
/// (SIGSTOP) while it is starting. Never set outside tests.
inline constexpr const char* kTestStartDelayVariable = "ORTFLEET_TEST_WORKER_START_DELAY";

}  // namespace ortfleet::detail
