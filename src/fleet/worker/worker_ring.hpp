#pragma once
// A worker's low-latency run path: tensors through a request ring (process/request_ring.hpp) instead
// of a JSON message and a memfd per run. The parent's RingClient submits requests from any number of
// threads (several in flight: pipelining) and grows the ring when a request or its response does not
// fit a slot; the worker's RingServer serves them on a thread of its own while its main thread keeps
// answering control messages on the socket.
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fleet/worker/wire.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "process/request_ring.hpp"

namespace ortfleet::detail {

/// The parent's side of one worker's ring.
class RingClient {
 public:
  /// What the client needs of the worker it talks to.
  struct Peer {
    std::string device;                 ///< named in errors
    std::function<bool()> alive;        ///< false once the worker is gone (its socket closed)
    /// Hands a new ring to the worker (a control message) and waits for its acknowledgement.
    std::function<void(int ring_fd)> install;
    /// The error for a run that ended without an answer (timed_out: the worker is killed; peer_gone:
    /// how it died), for the caller to throw.
    std::function<std::exception_ptr(RequestRing::Wait why, double timeout_s)> failure;
    /// Turns a response's tensors (host ones already copied out of the slot; device ones by reference)
    /// into the caller's outputs. None: the host tensors as they are.
    std::function<std::vector<Tensor>(std::vector<WireTensor> outputs, bool outputs_on_device)> receive;
  };
  /// Serves runs through `ring`, which the worker already has (the caller installed it).
  RingClient(Peer peer, std::shared_ptr<RequestRing> ring);
  ~RingClient();  ///< shutdown()
  RingClient(const RingClient&) = delete;
  RingClient& operator=(const RingClient&) = delete;

  /// One inference; `tag` names the session in the worker ("" for its only one).
  std::vector<Tensor> run(const RingMessage& request, const std::string& tag, double timeout_s);
  /// Submits the inference (waiting only while every slot is in flight) and returns at once; the
  /// request is copied into the ring before it returns.
  std::future<std::vector<Tensor>> run_async(const RingMessage& request, const std::string& tag, double timeout_s);
  /// Ends every wait: runs in flight fail with an error that says the worker was stopped. Idempotent.
  void shutdown();

  size_t slot_bytes() const;  ///< the current ring's data area per slot (grows)

  /// Slots of a new ring, and its first data area per slot (grown on demand).
  static constexpr uint32_t kSlots = 8;
  static constexpr size_t kInitialSlotBytes = 256 << 10;

 private:
  struct Claim {
    std::shared_ptr<RequestRing> ring;
    uint32_t slot = 0;
    uint64_t request_id = 0;
    size_t request_bytes = 0;
    int64_t deadline_ns = 0;
    bool outputs_on_device = false;
  };
  struct Pending {
    Claim claim;
    std::string tag;
    double timeout_s = 0;
    std::promise<std::vector<Tensor>> promise;
  };
  /// What a finished slot holds: the outputs, or the request's bytes to send again in a bigger ring.
  struct Finished {
    std::vector<Tensor> outputs;
    std::vector<std::byte> resend;  ///< non-empty: the response did not fit
    size_t needed_bytes = 0;
    bool outputs_on_device = false;
  };
  using Writer = std::function<void(std::byte* area, size_t capacity)>;

  /// A slot of a ring whose slots hold `bytes`, growing the ring first when they do not.
  Claim claim(size_t bytes);
  void grow(std::unique_lock<std::mutex>& lock, size_t bytes);
  void unclaim(const Claim& c);
  Claim submit(size_t bytes, size_t slot_bytes_needed, const Writer& write, const std::string& tag, double timeout_s,
               bool outputs_on_device);
  Claim submit(const RingMessage& request, const std::string& tag, double timeout_s);
  /// Reads the response of a done slot and frees the slot (or throws the worker's error).
  Finished finish(const Claim& c);
  std::vector<Tensor> wait_and_finish(const Claim& c, const std::string& tag, double timeout_s);
  std::vector<Tensor> resend(Finished finished, const std::string& tag, double timeout_s);
  [[noreturn]] void throw_failure(RequestRing::Wait why, double timeout_s = 0) const;
  void complete_loop();
  void fail_pending(const std::exception_ptr& error);

  Peer peer_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::shared_ptr<RequestRing> ring_;
  bool growing_ = false;
  bool stopped_ = false;
  size_t in_flight_ = 0;  // claimed slots of ring_ (growing waits for none)
  std::atomic<uint64_t> next_request_id_{1};
  std::list<Pending> pending_;   // run_async's requests in flight, completed by `completer_`
  std::thread completer_;
  std::vector<std::thread> resenders_;  // run_async requests whose response needed a bigger ring
};

/// The worker's side: a thread that takes requests from the ring, runs them and writes the outputs back.
class RingServer {
 public:
  /// Runs one request: the session named by `tag`, on a request whose host tensors view the ring.
  using Run = std::function<RingMessage(const std::string& tag, const RingMessage& request)>;
  /// Lets go of a response that did not fit its slot (the client sends the request again).
  using Discard = std::function<void(const RingMessage& response)>;
  /// Called with every new ring before it is served; what it returns lives as long as the ring is
  /// served (e.g. the ring's pages registered with CUDA).
  using Prepare = std::function<std::shared_ptr<void>(const RequestRing& ring)>;
  RingServer(Run run, Prepare prepare, Discard discard = {});
  ~RingServer();  ///< stop()
  RingServer(const RingServer&) = delete;
  RingServer& operator=(const RingServer&) = delete;

  /// Serves `ring` from now on: the first one, or a bigger one that replaces the last.
  void serve(std::shared_ptr<RequestRing> ring);
  /// Finishes the request at hand, then stops serving. Idempotent.
  void stop();

 private:
  void loop();
  void handle(const std::shared_ptr<RequestRing>& ring, uint32_t slot);

  Run run_;
  Prepare prepare_;
  Discard discard_;
  std::mutex mutex_;
  std::shared_ptr<RequestRing> current_;
  std::shared_ptr<RequestRing> next_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ortfleet::detail
