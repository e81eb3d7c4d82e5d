#include "process/ipc.hpp"

#include <algorithm>

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {
using nlohmann::json;

namespace {
constexpr size_t kMaxMessage = 4u << 20;  // socket buffer asked for; messages are a few KiB
constexpr size_t kMaxFds = 8;
}  // namespace

std::pair<UniqueFd, UniqueFd> MessageChannel::socket_pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    throw Error(std::string("socketpair failed: ") + std::strerror(errno), "Check the process's file-descriptor limit (ulimit -n)");
  }
  // Messages may be large (timelines); let the kernel buffer a whole one.
  int size = static_cast<int>(kMaxMessage);
  ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  ::setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void MessageChannel::send(const json& body, const std::vector<int>& fds) {
  const std::string text = body.dump();
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  if (!fds.empty()) {
    if (fds.size() > kMaxFds) throw Error("too many descriptors in one message");
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t sent;
  do {
    sent = ::sendmsg(socket_.get(), &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) throw Error("sending to " + peer_ + " failed: " + std::strerror(errno));
}

int64_t deadline_in(double seconds, int64_t from_ns) {
  const double ns = seconds * 1e9;
  return ns >= static_cast<double>(kNoDeadline - from_ns) ? kNoDeadline : from_ns + static_cast<int64_t>(ns);
}

namespace {
/// Waits until `fd` is readable (a message or the closed end) or the deadline passes; false then.
bool readable_before(int fd, int64_t deadline_ns, const std::string& peer) {
  while (true) {
    int timeout_ms = -1;
    if (deadline_ns != kNoDeadline) {
      const int64_t left_ns = deadline_ns - monotonic_ns();
      if (left_ns <= 0) timeout_ms = 0;
      else timeout_ms = static_cast<int>(std::min<int64_t>((left_ns + 999'999) / 1'000'000, 3'600'000));
    }
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, timeout_ms);
    if (n > 0) return true;  // readable, hung up or in error: the recv below tells which
    if (n < 0 && errno != EINTR) {
      throw Error("waiting for " + peer + " failed: " + std::strerror(errno));
    }
    if (n == 0 && deadline_ns != kNoDeadline && monotonic_ns() >= deadline_ns) return false;
  }
}
}  // namespace

Received MessageChannel::receive(int64_t deadline_ns) {
  Received result;
  if (!readable_before(socket_.get(), deadline_ns, peer_)) {
    result.kind = Received::Kind::timed_out;
    return result;
  }
  // Peek at the length first, so each message costs a buffer of its own size.
  ssize_t length;
  do {
    length = ::recv(socket_.get(), nullptr, 0, MSG_PEEK | MSG_TRUNC);
  } while (length < 0 && errno == EINTR);
  if (length == 0) {
    // The peer's end closed, or an empty message (which a SEQPACKET socket delivers as a zero-length
    // read too): only a closed end reports a hang-up.
    pollfd p{socket_.get(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP)) != 0) return result;
    [[maybe_unused]] const ssize_t consumed = ::recv(socket_.get(), nullptr, 0, 0);
    result.kind = Received::Kind::malformed;
    result.problem = "it is empty";
    return result;
  }
  if (length < 0) {
    if (errno == ECONNRESET) return result;
    throw Error("receiving from " + peer_ + " failed: " + std::strerror(errno));
  }
  std::string buffer(static_cast<size_t>(length), '\0');
  iovec iov{buffer.data(), buffer.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // Room for the descriptors and, on a socket that passes credentials, the sender's.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds) + CMSG_SPACE(sizeof(ucred))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    got = ::recvmsg(socket_.get(), &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got == 0) return result;
  if (got < 0) {
    if (errno == ECONNRESET) return result;
    throw Error("receiving from " + peer_ + " failed: " + std::strerror(errno));
  }
  Message& m = result.message;
  std::optional<int> sender;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(ucred))) {
      ucred credentials{};
      std::memcpy(&credentials, CMSG_DATA(c), sizeof(credentials));
      sender = credentials.pid;
      continue;
    }
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      m.fds.emplace_back(fd);
    }
  }
  if ((msg.msg_flags & MSG_TRUNC) != 0) {
    result.kind = Received::Kind::malformed;
    result.problem = "it was cut short";
    return result;  // its descriptors close with it
  }
  std::vector<UniqueFd> fds = std::move(m.fds);
  result = read_message(buffer.data(), static_cast<size_t>(got));
  result.message.fds = std::move(fds);  // closed with it when nobody takes them
  result.message.sender_pid = sender;
  return result;
}

Received read_message(const char* bytes, size_t size) {
  Received read;
  read.kind = Received::Kind::malformed;
  json body = json::parse(bytes, bytes + size, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    read.problem = "it is not JSON (" + std::to_string(size) + " bytes)";
  } else if (!body.is_object()) {
    read.problem = std::string("it is JSON but not an object (a ") + body.type_name() + ")";
  } else {
    read.kind = Received::Kind::message;
    read.message.body = std::move(body);
  }
  return read;
}

bool MessageChannel::peer_closed() const {
  pollfd p{socket_.get(), 0, 0};  // no events asked: hang-up and errors are reported regardless
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

std::shared_ptr<SharedBuffer> SharedBuffer::create(size_t bytes) {
  UniqueFd fd(::memfd_create("ortfleet-tensors", MFD_CLOEXEC));
  if (!fd) throw Error(std::string("memfd_create failed: ") + std::strerror(errno));
  const size_t size = std::max<size_t>(bytes, 1);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    throw Error(std::string("cannot size shared memory: ") + std::strerror(errno), "Check free memory (/dev/shm, RAM)");
  }
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) throw Error(std::string("cannot map shared memory: ") + std::strerror(errno));
  return std::shared_ptr<SharedBuffer>(new SharedBuffer(std::move(fd), data, size));
}

std::shared_ptr<SharedBuffer> SharedBuffer::attach(UniqueFd fd) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw Error(std::string("cannot stat shared memory: ") + std::strerror(errno));
  const auto size = static_cast<size_t>(st.st_size);
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) throw Error(std::string("cannot map shared memory: ") + std::strerror(errno));
  return std::shared_ptr<SharedBuffer>(new SharedBuffer(std::move(fd), data, size));
}

SharedBuffer::SharedBuffer(UniqueFd fd, void* data, size_t size) : fd_(std::move(fd)), data_(data), size_(size) {
  struct stat st {};
  if (::fstat(fd_.get(), &st) == 0) inode_ = st.st_ino;
}

bool SharedBuffer::is(int fd) const {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && st.st_ino == inode_ && static_cast<size_t>(st.st_size) == size_;
}

std::shared_ptr<SharedBuffer> ReceivedBuffer::map(UniqueFd fd) {
  if (last_ && last_->is(fd.get())) return last_;  // fd closes here; the mapping stays
  last_ = SharedBuffer::attach(std::move(fd));
  return last_;
}

SharedBuffer::~SharedBuffer() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace ortfleet::detail
