#pragma once
// The parent's side of the worker protocol (fleet/worker/worker_protocol.hpp): worker processes, one per
// device, for the processes and fleet strategies and for worker pools. The parent spawns the
// ortfleet-worker executable (its side: fleet/worker/worker_server.hpp) with one end of a socket pair (the
// control channel) and talks to it through a WorkerChannel; a pool server hands its clients channels
// of their own to the same worker.
// A worker keeps every session it started, keyed by the model's content, the plan and the runtime: a
// second start of the same key is answered at once ("resident"). A session is held by the channels
// that started or attached it; one nobody holds stays until it is evicted (least recently used first,
// when the worker holds more than its limit or a new session runs out of device memory).
#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.hpp"
#include "fleet/worker/device_tensors.hpp"
#include "fleet/local/local_start.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "fleet/worker/worker_ring.hpp"
#include "ortfleet/base/error.hpp"
#include "process/ipc.hpp"
#include "process/pidfd.hpp"

namespace ortfleet::detail {

/// "7200 s", "0.5 s": a timeout as the errors show it.
std::string seconds_text(double seconds);

/// The worker executable: explicit, $ORTFLEET_WORKER, or ortfleet-worker next to this binary
/// (or in its bin/ or ../bin/ folders). Throws ortfleet::Error naming where it looked.
std::string find_worker_executable(const std::string& explicit_path);

/// The ONNX Runtime library a worker should load: `explicit_library`, else the one this process would.
std::string resolve_ort_library(const std::string& explicit_library);

/// What worker processes run: the executable and the ONNX Runtime library they load.
struct WorkerRuntime {
  std::string executable;
  std::string ort_library;
};
/// The one decision of both, for a fleet, a pool and the pool a start leaves alike: find_worker_executable
/// and resolve_ort_library. Throws ortfleet::Error when there is no worker executable.
WorkerRuntime resolve_worker_runtime(const std::string& explicit_executable, const std::string& explicit_library);

/// What a worker reports once a session is ready.
struct WorkerReady {
  std::string session;  ///< the key to run it by
  DeviceStatus status;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<TimelineEvent> timeline;  ///< the phases of this start, on its device's lane
};

/// A ready reply ({"event":"ready", ...}) read back.
WorkerReady ready_from_json(const nlohmann::json& body);

/// One connection to a worker: the control channel of the process that spawned it, or one a pool
/// server handed to a client. One request at a time per channel.
class WorkerChannel {
 public:
  struct Hooks {
    std::function<std::string()> how_it_ended;  ///< after the worker closed the channel: "was killed by SIGKILL"
    std::function<void()> kill;                 ///< a worker that did not answer in time (none: leave it)
    /// The error for a worker that closed this channel during `doing` ("a run"), where this process never
    /// sees the worker's own messages (a pool's worker: they are in the pool's log). None: how_it_ended's
    /// words, pointing at the messages above.
    std::function<Error(const std::string& doing)> gone;
  };
  WorkerChannel(UniqueFd socket, Device device, int pid, Hooks hooks = {});
  ~WorkerChannel();  ///< ends the runs in flight on its ring
  WorkerChannel(const WorkerChannel&) = delete;
  WorkerChannel& operator=(const WorkerChannel&) = delete;

  const Device& device() const { return device_; }
  int pid() const { return pid_; }
  /// The socket, to hand this channel to another process (SCM_RIGHTS duplicates it).
  int fd() const { return channel_.fd(); }

  /// Sends the start request and waits until the session is ready or failed, at most `timeout_s`.
  /// Throws ortfleet::Error with the worker's error, how it died, or that it did not answer in time.
  WorkerReady start(const LocalStartPlan& plan, double timeout_s);
  /// One inference on `session`; a worker that does not answer within `timeout_s` fails the channel.
  /// Device tensors on the worker's GPU cross in place (fleet/worker/device_tensors.hpp), and so do the
  /// outputs with `outputs_on_device`.
  std::vector<Tensor> run(const std::string& session, const std::vector<Tensor>& inputs, double timeout_s, bool outputs_on_device = false);
  /// The same, submitted without waiting for it: several runs may be in flight at once (through the
  /// request ring; without one, a thread of its own waits for the run). The inputs are copied before
  /// it returns. The future throws what run() would.
  std::future<std::vector<Tensor>> run_async(const std::string& session, const std::vector<Tensor>& inputs, double timeout_s,
                                             bool outputs_on_device = false);
  /// Whether runs go through a request ring (true) or the socket (false); without a choice made before
  /// the ring is first needed, the ring unless ORTFLEET_WORKER_RING is "0".
  void choose_request_ring(bool use);
  /// How this channel's tensors crossed so far.
  TransferCounters transfer_counters() const;
  /// Ends the runs in flight on this channel's request ring (they fail: the worker is stopping).
  void close_ring();
  /// Lets go of a session this channel holds (best effort: a worker that is gone holds nothing).
  void release(const std::string& session);
  /// Any other request, of `kind` with `fields`: the reply when it is the kind's answer, else throws as
  /// start() does.
  Message call(const MessageKind& kind, nlohmann::json fields, double timeout_s, const std::vector<int>& fds = {});
  /// False once the worker died, closed this channel or was given up on: every later request fails.
  bool alive() const;
  /// The error every later request throws, once this channel knows its worker is gone; nothing while it
  /// is reachable, or while a request holds the channel (that request is finding out). Never waits.
  std::optional<Error> gone_error() const;

 private:
  [[noreturn]] void gone(const std::string& doing);
  /// A worker that did not answer in time: killed (when the hooks can), and the channel is gone.
  [[noreturn]] void unresponsive(const std::string& timed_out, const std::string& timeout_hint);
  std::string run_timed_out(double timeout_s) const;
  /// A run through a "run" message and shared memory (no request ring), on host tensors.
  std::vector<Tensor> run_on_socket(const std::string& session, const std::vector<Tensor>& host, double timeout_s, bool outputs_on_device);
  void throw_if_gone() const;  ///< mutex_ held
  Error no_worker_error() const;  ///< mutex_ held, gone_ set
  /// The channel's request ring, handed to the worker after its first start (or before its first run,
  /// waiting at most `timeout_s` for the worker to take it); none when ORTFLEET_WORKER_RING is 0.
  std::shared_ptr<RingClient> ring(double timeout_s);
  /// The error of a ring run that got no answer: the worker died, or it is killed for not answering.
  std::exception_ptr ring_failure(RequestRing::Wait why, double timeout_s);
  Message expect(Received reply, const char* expected, const std::string& doing, const std::string& timed_out,
                 const std::string& timeout_hint);

  Device device_;
  int pid_;
  Hooks hooks_;
  std::string gone_;  // why the worker is no longer reachable, once it is not
  std::atomic<bool> reachable_{true};  // gone_ is empty: read without the lock (alive())
  MessageChannel channel_;
  std::shared_ptr<SharedBuffer> input_buffer_;  // ours, reused while big enough (socket path; under socket_run_mutex_)
  ReceivedBuffer outputs_;                       // the worker's output buffer, mapped once (the same)
  mutable std::mutex mutex_;                     // one request at a time
  // One run at a time on the socket path, from packing its inputs to copying its outputs out: both
  // buffers are reused by the next run.
  std::mutex socket_run_mutex_;
  std::mutex ring_mutex_;
  bool ring_opened_ = false;
  std::optional<bool> ring_chosen_;  // ring_mutex_
  std::unique_ptr<DeviceTensorsClient> transfers_;  // before ring_: its hooks use it
  std::shared_ptr<RingClient> ring_;  // declared last: it goes first, while what its hooks use is there
};

/// A worker another process spawned and handed over (a job's own, to the warm pool it leaves): its
/// control channel and crash pipe, as received, and who it is.
struct AdoptedWorker {
  UniqueFd channel;
  UniqueFd crash_reports;
  int pid = -1;
  Device device;
  std::string visible_devices;
  std::unique_ptr<PidFd> watch;  ///< held on `pid` since it was proven a worker (prove_worker); opened anew when none
};

class WorkerProcess {
 public:
  /// Spawns the worker (posix_spawn; fork would copy a parent that may hold CUDA or Python state).
  /// `narrow`: the worker sees only its own GPU (CUDA_VISIBLE_DEVICES), so its cuInit sets up one GPU
  /// instead of every GPU of the node.
  /// `background`: work no job waits for (a cache entry made after ready): the worker lowers its CPU
  /// and I/O priority before it starts any thread, so that the jobs' processes come first.
  WorkerProcess(const std::string& executable, const Device& device, bool narrow = true, bool background = false);
  /// A worker this process did not spawn: watched through a pidfd (only its parent may wait for it).
  /// Throws ortfleet::Error when it is gone already.
  explicit WorkerProcess(AdoptedWorker adopted);
  ~WorkerProcess();  ///< stops the worker (unless it was handed over)
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  /// The worker's pid; -1 once it has been reaped.
  int pid() const { return pid_.load(); }
  int64_t spawn_ns() const { return spawn_ns_; }
  const Device& device() const { return device_; }
  /// What CUDA_VISIBLE_DEVICES the worker got; empty when it sees what this process sees.
  const std::string& visible_devices() const { return visible_; }
  WorkerChannel& channel() { return *channel_; }
  /// Hooks for another channel to this worker (attach): how the worker ended, when it did, with its
  /// crash line. With `end_when_unresponsive`, a request on that channel that misses its deadline ends
  /// the worker (terminate(kUnresponsiveGraceS)): busy past a deadline, it would serve no later request
  /// either (the next start of the same model waited on it), and its owner starts another. Without, it
  /// is left as it is.
  WorkerChannel::Hooks observer_hooks(bool end_when_unresponsive = false);
  /// How long a worker that missed a deadline gets between SIGTERM and SIGKILL.
  static constexpr double kUnresponsiveGraceS = 2;

  /// Loads ONNX Runtime and the CUDA EP, runs cuInit and makes the context: what a start on this
  /// worker then skips; with `prime`, on a GPU, also cuDNN's and cuBLAS's first use (two throwaway
  /// sessions). It keeps at most `max_resident_sessions` sessions nobody holds (0: its default). The
  /// events of that work, on the device's lane.
  std::vector<TimelineEvent> initialise(const LocalStartPlan& plan, size_t max_resident_sessions, bool prime, double timeout_s);
  WorkerReady start(const LocalStartPlan& plan, double timeout_s) { return channel_->start(plan, timeout_s); }
  /// A new channel to this worker for another process, holding `sessions` for as long as it is open.
  UniqueFd attach(const std::vector<std::string>& sessions, double timeout_s);
  void stop();
  /// What another process needs to take this worker over: its control channel and crash pipe (to
  /// send with SCM_RIGHTS, which duplicates them). The channel's request ring is closed first.
  std::pair<int, int> handover_fds();
  /// The worker now belongs to the process it was handed to: this object no longer stops it.
  void handed_over();
  /// Stops it now, whatever it is doing: SIGTERM (a worker removes the files it was writing, base/
  /// termination_cleanup.hpp), then SIGKILL after `grace_s`. For work nobody waits for.
  void terminate(double grace_s = 2);
  bool alive() const;
  /// Reaps the worker if it has exited (non-blocking); how it ended, or empty while it runs.
  std::string exited();

 private:
  /// How long a worker's end is waited for where nobody can wait on it for ever: after its channel
  /// closed, after SIGKILL. A process that outlives it (stuck in its exit, in a driver call) is left
  /// to a later exited(), and never holds a lock meanwhile.
  static constexpr double kEndWaitS = 5;
  std::string how_it_ended();
  void kill_now();
  /// SIGKILL unless it ends within `grace_s`; `why` is then how it ended.
  void kill_after(double grace_s, const std::string& why);
  std::string ended_text() const;
  /// How the process ended from its wait status, with the crash line it wrote (if any).
  std::string describe_end(int status);

  Device device_;
  std::string visible_;
  std::atomic<int> pid_{-1};  // written under process_mutex_, read without it
  int64_t spawn_ns_ = 0;
  std::string ended_;
  UniqueFd crash_reports_;  // the read end of the worker's crash-line pipe
  std::unique_ptr<PidFd> adopted_;  // set when another process spawned it: watched, never waited for
  /// Whether it has ended, after at most `wait_s`; reaps a child of ours and records how it ended.
  /// Waits without process_mutex_.
  bool ended_after(double wait_s);
  /// Whether it has ended now (reaped, how recorded). process_mutex_ held.
  bool reap_if_ended();
  /// Sends `signal` to it, whoever spawned it.
  void send_signal(int signal) const;
  std::unique_ptr<WorkerChannel> channel_;
  mutable std::mutex process_mutex_;  // pid_ and ended_
};

}  // namespace ortfleet::detail
