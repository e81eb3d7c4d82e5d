#pragma once
// A request/response ring in shared memory between a client process and a server process: the
// low-latency path of a worker's runs, beside the socket that carries control messages.
//
// One memfd holds a header and a fixed number of slots; each slot is a state word, a small fixed
// header (request id, a tag naming what to run, status, payload sizes) and a data area that is reused
// call after call. Several slots can be in flight at once (pipelining). Both sides map the same memfd,
// passed over the socket once. Wake-ups are futexes on counters in the shared header, after a short
// spin; every wait has a deadline and asks a liveness callback in slices, so a peer that died or
// stopped never leaves a waiter hanging. What the payload bytes mean is the caller's business (the
// fleet encodes tensors in them, fleet/worker/wire.hpp).
//
// A slot's life: free -> (client) submitted -> (server) working -> (server) done -> (client) free.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.hpp"

namespace ortfleet::detail {

class SharedBuffer;

class RequestRing {
 public:
  /// What a slot's response says (the server's word; the client's retries and errors follow it).
  enum class Status : uint32_t {
    ok = 0,
    failed = 1,           ///< the payload is the error, as the caller encoded it
    response_too_large = 2,  ///< the response needs `needed_bytes` of data area; nothing else was kept
  };
  /// How a wait ended.
  enum class Wait { done, timed_out, peer_gone, stopped };
  /// Asked between wait slices: false when the peer is gone (its socket closed, its pid dead).
  using PeerAlive = std::function<bool()>;

  static constexpr size_t kTagBytes = 64;

  /// A new ring (the client's side): `slots` slots of `slot_bytes` of data each.
  static std::shared_ptr<RequestRing> create(uint32_t slots, size_t slot_bytes);
  /// The ring another process created (the server's side); checks its layout. Takes the descriptor.
  static std::shared_ptr<RequestRing> attach(UniqueFd fd);

  ~RequestRing();
  RequestRing(const RequestRing&) = delete;
  RequestRing& operator=(const RequestRing&) = delete;

  int fd() const;
  uint32_t slot_count() const { return slot_count_; }
  size_t slot_bytes() const { return slot_bytes_; }
  /// The whole mapping (for registering it with CUDA).
  void* mapping() const;
  size_t mapping_bytes() const;

  /// The data area of `slot`: requests are written from its start, responses after them.
  std::byte* data(uint32_t slot) const;

  // --- the client's side (any number of threads of one process) ---
  /// A free slot, waiting for one while all are in flight; nullopt when `stop_client()` was called.
  std::optional<uint32_t> acquire();
  /// Hands the request in `data(slot)[0, request_bytes)` to the server and wakes it.
  void submit(uint32_t slot, uint64_t request_id, const std::string& tag, size_t request_bytes);
  /// Waits until `slot` is done, the deadline passes (monotonic ns) or `peer_alive` says no.
  Wait wait_done(uint32_t slot, int64_t deadline_ns, const PeerAlive& peer_alive) const;
  /// Whether `slot` holds a response (never blocks).
  bool done(uint32_t slot) const;
  /// The number of responses so far; wait_any() waits for it to move past a value read before.
  uint32_t responses() const;
  /// Waits until responses() differs from `seen`, or the deadline / `peer_alive` / stop_client() ends it.
  Wait wait_any(uint32_t seen, int64_t deadline_ns, const PeerAlive& peer_alive) const;
  struct Response {
    Status status = Status::ok;
    uint64_t request_id = 0;
    size_t offset = 0;        ///< where the response lies in data(slot)
    size_t bytes = 0;
    size_t needed_bytes = 0;  ///< response_too_large: the data area it would take
  };
  Response response(uint32_t slot) const;
  /// Makes `slot` free again (after its response was read, or when it was never submitted).
  void release(uint32_t slot);
  /// Wakes every waiter of this process (acquire, wait_any): the owner is going away.
  void stop_client();

  // --- the server's side (one thread) ---
  /// Waits for a submitted request and takes it (state working): its slot, or nullopt when `stop` was
  /// set, or the ring was retired, by the time a wait slice ended.
  std::optional<uint32_t> next_request(const std::atomic<bool>& stop);
  struct Request {
    uint64_t request_id = 0;
    std::string tag;
    size_t bytes = 0;
  };
  Request request(uint32_t slot) const;
  /// Publishes the response written at data(slot)[offset, offset + bytes) and wakes the client.
  void respond(uint32_t slot, Status status, size_t offset, size_t bytes, size_t needed_bytes = 0);
  /// Tells a server waiting in next_request() to give this ring up (the client made a bigger one).
  void retire();
  bool retired() const;

 private:
  struct Header;
  struct Slot;
  RequestRing(std::shared_ptr<SharedBuffer> memory, uint32_t slots, size_t slot_bytes);
  Header& header() const;
  Slot& slot(uint32_t index) const;

  std::shared_ptr<SharedBuffer> memory_;
  uint32_t slot_count_;
  size_t slot_bytes_;
  // The client's bookkeeping of which slots this process holds (a slot is free in shared memory
  // only between release and the next submit; claiming one is local to the client process).
  std::mutex client_mutex_;
  std::condition_variable slot_freed_;
  std::vector<bool> held_;
  std::atomic<bool> client_stopped_{false};
  uint32_t next_scan_ = 0;  // the server starts its scans after the slot it served last (fairness)
};

}  // namespace ortfleet::detail
