#pragma once
// Talking to another process: JSON messages over a SOCK_SEQPACKET socket (message boundaries kept,
// file descriptors passed along), and shared memory (memfd) that the receiver maps instead of
// copying bytes through the socket. What the messages mean is the fleet's business (fleet/worker/wire.hpp).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.hpp"
#include "ortfleet/base/clock.hpp"

namespace ortfleet::detail {

struct Message {
  nlohmann::json body;
  std::vector<UniqueFd> fds;
  /// Who sent it, in the kernel's words (SCM_CREDENTIALS): its process id, when the receiving socket
  /// passes credentials (SO_PASSCRED). What the message itself says of its sender proves nothing.
  std::optional<int> sender_pid;
};

/// A time on the monotonic clock (ns) by which an answer must have come.
inline constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();
/// `seconds` after `from_ns` (monotonic clock); kNoDeadline when that lies past the clock's end (infinity).
int64_t deadline_in(double seconds, int64_t from_ns);

/// Waits on `changed` (with `lock` held) until `done()` or the monotonic clock reaches `deadline_ns`;
/// returns what `done()` says then.
template <class Done>
bool wait_until(std::condition_variable& changed, std::unique_lock<std::mutex>& lock, int64_t deadline_ns, Done done) {
  if (deadline_ns == kNoDeadline) {
    changed.wait(lock, done);
    return true;
  }
  while (!done()) {
    const int64_t left_ns = deadline_ns - monotonic_ns();
    if (left_ns <= 0) return false;
    changed.wait_for(lock, std::chrono::nanoseconds(left_ns));
  }
  return true;
}

/// What a receive got: a message, the peer's closed end (it exited), nothing before the deadline (the
/// peer is alive but silent: stopped, hung, or still busy), or a message that is not one of ours (not
/// a JSON object, cut short): a server refuses it and goes on serving, a client treats it as an error.
struct Received {
  enum class Kind { message, closed, timed_out, malformed };
  Kind kind = Kind::closed;
  Message message;      ///< when kind is message
  std::string problem;  ///< when kind is malformed: what is wrong with it, in words
};

/// The bytes of one message read as a message: a JSON object (Kind::message), or why it is not one
/// (Kind::malformed). What every receive() does with what arrived; never throws.
Received read_message(const char* bytes, size_t size);

class MessageChannel {
 public:
  /// `peer` names the other end in errors ("the worker process", "the pool server at /run/...").
  explicit MessageChannel(UniqueFd socket, std::string peer = "the worker process") : socket_(std::move(socket)), peer_(std::move(peer)) {}
  /// A connected pair: [0] for this process, [1] for the child.
  static std::pair<UniqueFd, UniqueFd> socket_pair();

  void send(const nlohmann::json& body, const std::vector<int>& fds = {});
  /// Waits for the next message until `deadline_ns` (monotonic clock), polling the socket: a peer that
  /// never answers cannot hold the caller past it. What a peer sends never makes it throw (a malformed
  /// message is Kind::malformed); only a failing socket does.
  Received receive(int64_t deadline_ns = kNoDeadline);
  int fd() const { return socket_.get(); }
  const std::string& peer() const { return peer_; }
  /// Whether the other end has closed (its process exited), without reading: safe beside a receive.
  bool peer_closed() const;

 private:
  UniqueFd socket_;
  std::string peer_;
};

/// Anonymous shared memory (memfd) mapped read-write into this process.
class SharedBuffer {
 public:
  static std::shared_ptr<SharedBuffer> create(size_t bytes);
  /// Maps a buffer received from another process (takes the descriptor).
  static std::shared_ptr<SharedBuffer> attach(UniqueFd fd);
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  std::byte* data() const { return static_cast<std::byte*>(data_); }
  size_t size() const { return size_; }
  int fd() const { return fd_.get(); }
  /// Whether `fd` (received from another process) is this very buffer: its mapping can be reused.
  bool is(int fd) const;

 private:
  SharedBuffer(UniqueFd fd, void* data, size_t size);
  UniqueFd fd_;
  void* data_;
  size_t size_;
  uint64_t inode_ = 0;
};

/// A buffer received again and again (the same memfd, sent with every message): mapped once.
class ReceivedBuffer {
 public:
  /// The mapping of `fd`, reusing the last one when `fd` is the same buffer (the descriptor is closed).
  std::shared_ptr<SharedBuffer> map(UniqueFd fd);

 private:
  std::shared_ptr<SharedBuffer> last_;
};

}  // namespace ortfleet::detail
