#include "process/request_ring.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "base/environment.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {

namespace {
constexpr uint64_t kMagic = 0x676e69722d74726fULL;  // "ort-ring"
constexpr uint32_t kVersion = 1;
constexpr size_t kPage = 4096;
// How long a waiter polls (after its first 64 looks) before it sleeps on the futex; ORTFLEET_RING_SPIN_US
// sets it. Waking a thread that slept costs up to ~0.1 ms on a server whose idle cores sleep deeply:
// on 2 × H200 a ResNet-50 call at batch 1 through a worker was 0.84–0.93x a call in this process with
// sleeping waiters, and 0.97–1.01x with waiters that polled through the call
// (docs/results/2026-11-23/2xH200-final/d/final-d.plan). Polling pays only where a core is free for it: on a busy 2-core machine
// a 20 µs poll made the identity round trip 5x slower (p50 53 µs against 10.5 µs without), as both
// sides took the CPU the other needed. So machines with a few cores to spare poll for up to 2 ms
// (past it, a call is long enough for a wake-up not to matter, and an idle worker stops burning a
// core); small ones do not poll.
constexpr int64_t kDefaultSpinNs = 2'000'000;
constexpr unsigned kMinThreadsToPoll = 8;
int64_t spin_ns() {
  static const int64_t ns = [] {
    if (const auto setting = env_number(EnvVar::ring_spin_us)) return static_cast<int64_t>(*setting) * 1000;  // checked: 0 to a second
    return std::thread::hardware_concurrency() >= kMinThreadsToPoll ? kDefaultSpinNs : int64_t{0};
  }();
  return ns;
}
// A sleeping waiter wakes this often to ask whether its peer is still there.
constexpr int64_t kSliceNs = 50'000'000;

enum SlotState : uint32_t { kFree = 0, kSubmitted = 1, kWorking = 2, kDone = 3 };

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

uint32_t* futex_word(const std::atomic<uint32_t>& word) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(&word));
}

/// Sleeps while `word` holds `expected`, at most `timeout_ns`. Shared (not private) futexes: the
/// word lives in memory mapped by two processes.
void futex_wait(const std::atomic<uint32_t>& word, uint32_t expected, int64_t timeout_ns) {
  timespec timeout{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
  ::syscall(SYS_futex, futex_word(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);  // EAGAIN, EINTR, ETIMEDOUT: the caller looks again
}

void futex_wake(const std::atomic<uint32_t>& word) { ::syscall(SYS_futex, futex_word(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// Waits until `ready()`, first spinning, then sleeping on the futex `counter` (which whoever makes
/// `ready()` true bumps and wakes when `waiting` is non-zero). `stopped()` and `peer_alive()` are asked
/// between slices.
template <class Ready, class Stopped>
RequestRing::Wait wait_for(Ready ready, const std::atomic<uint32_t>& counter, std::atomic<uint32_t>& waiting,
                           int64_t deadline_ns, Stopped stopped, const RequestRing::PeerAlive& peer_alive) {
  using Wait = RequestRing::Wait;
  const int64_t spin_until = monotonic_ns() + spin_ns();
  do {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return Wait::done;
      cpu_relax();
    }
  } while (monotonic_ns() < spin_until);
  while (true) {
    if (stopped()) return Wait::stopped;
    const int64_t left = deadline_ns - monotonic_ns();
    if (left <= 0) return ready() ? Wait::done : Wait::timed_out;
    waiting.fetch_add(1);
    const uint32_t seen = counter.load();
    // Looked at after announcing the wait: whoever makes it ready after this sees `waiting` and wakes us.
    if (ready()) {
      waiting.fetch_sub(1);
      return Wait::done;
    }
    futex_wait(counter, seen, std::min(left, kSliceNs));
    waiting.fetch_sub(1);
    if (ready()) return Wait::done;
    if (peer_alive && !peer_alive()) return ready() ? Wait::done : Wait::peer_gone;
  }
}
}  // namespace

struct RequestRing::Header {
  uint64_t magic;
  uint32_t version;
  uint32_t slot_count;
  uint64_t slot_bytes;
  uint64_t data_offset;
  alignas(64) std::atomic<uint32_t> requests;  // bumped by every submit (the server's futex)
  std::atomic<uint32_t> server_waiting;
  std::atomic<uint32_t> retired;
  alignas(64) std::atomic<uint32_t> responses;  // bumped by every response (the clients' futex)
  std::atomic<uint32_t> clients_waiting;
};

struct RequestRing::Slot {
  alignas(64) std::atomic<uint32_t> state;
  uint32_t status;
  uint64_t request_id;
  uint64_t request_bytes;
  uint64_t response_offset;
  uint64_t response_bytes;
  uint64_t needed_bytes;
  char tag[kTagBytes];
};

std::shared_ptr<RequestRing> RequestRing::create(uint32_t slots, size_t slot_bytes) {
  if (slots == 0 || slots > 1024) throw Error("a request ring needs 1 to 1024 slots (asked for " + std::to_string(slots) + ")");
  slot_bytes = round_up(std::max<size_t>(slot_bytes, kPage), kPage);
  const size_t data_offset = round_up(sizeof(Header) + slots * sizeof(Slot), kPage);
  if (slot_bytes > (SIZE_MAX - data_offset) / slots) throw Error("a request ring of " + std::to_string(slots) + " slots of " +
                                                                 std::to_string(slot_bytes) + " bytes does not fit in memory");
  auto memory = SharedBuffer::create(data_offset + slots * slot_bytes);
  auto* header = new (memory->data()) Header{};
  header->magic = kMagic;
  header->version = kVersion;
  header->slot_count = slots;
  header->slot_bytes = slot_bytes;
  header->data_offset = data_offset;
  for (uint32_t i = 0; i < slots; ++i) new (memory->data() + sizeof(Header) + i * sizeof(Slot)) Slot{};
  return std::shared_ptr<RequestRing>(new RequestRing(std::move(memory), slots, slot_bytes));
}

std::shared_ptr<RequestRing> RequestRing::attach(UniqueFd fd) {
  auto memory = SharedBuffer::attach(std::move(fd));
  const auto* header = reinterpret_cast<const Header*>(memory->data());
  const auto bad = [](const std::string& why) {
    return Error("the request ring is malformed: " + why, "The worker and its parent come from different ortfleet builds?");
  };
  if (memory->size() < sizeof(Header) || header->magic != kMagic || header->version != kVersion) throw bad("wrong magic or version");
  const uint32_t slots = header->slot_count;
  const size_t data_offset = round_up(sizeof(Header) + size_t{slots} * sizeof(Slot), kPage);
  if (slots == 0 || slots > 1024 || header->data_offset != data_offset || header->slot_bytes == 0 ||
      header->slot_bytes > (memory->size() - data_offset) / slots) {
    throw bad("its layout does not fit its " + std::to_string(memory->size()) + " bytes");
  }
  const size_t slot_bytes = header->slot_bytes;
  return std::shared_ptr<RequestRing>(new RequestRing(std::move(memory), slots, slot_bytes));
}

RequestRing::RequestRing(std::shared_ptr<SharedBuffer> memory, uint32_t slots, size_t slot_bytes)
    : memory_(std::move(memory)), slot_count_(slots), slot_bytes_(slot_bytes), held_(slots, false) {}

RequestRing::~RequestRing() = default;

int RequestRing::fd() const { return memory_->fd(); }
void* RequestRing::mapping() const { return memory_->data(); }
size_t RequestRing::mapping_bytes() const { return memory_->size(); }

RequestRing::Header& RequestRing::header() const { return *reinterpret_cast<Header*>(memory_->data()); }

RequestRing::Slot& RequestRing::slot(uint32_t index) const {
  if (index >= slot_count_) throw Error("request ring slot " + std::to_string(index) + " does not exist");
  return *reinterpret_cast<Slot*>(memory_->data() + sizeof(Header) + index * sizeof(Slot));
}

std::byte* RequestRing::data(uint32_t index) const {
  if (index >= slot_count_) throw Error("request ring slot " + std::to_string(index) + " does not exist");
  return memory_->data() + header().data_offset + index * slot_bytes_;
}

// --- the client's side ---

std::optional<uint32_t> RequestRing::acquire() {
  std::unique_lock lock(client_mutex_);
  while (true) {
    if (client_stopped_.load()) return std::nullopt;
    for (uint32_t i = 0; i < slot_count_; ++i) {
      if (!held_[i]) {
        held_[i] = true;
        return i;
      }
    }
    slot_freed_.wait(lock);
  }
}

void RequestRing::submit(uint32_t index, uint64_t request_id, const std::string& tag, size_t request_bytes) {
  if (tag.size() >= kTagBytes) throw Error("the tag '" + tag + "' is longer than a request ring holds (" + std::to_string(kTagBytes - 1) + " bytes)");
  if (request_bytes > slot_bytes_) throw Error("a request of " + std::to_string(request_bytes) + " bytes does not fit a ring slot");
  Slot& s = slot(index);
  s.request_id = request_id;
  s.request_bytes = request_bytes;
  std::memset(s.tag, 0, kTagBytes);
  std::memcpy(s.tag, tag.data(), tag.size());
  s.status = 0;
  s.response_offset = s.response_bytes = s.needed_bytes = 0;
  s.state.store(kSubmitted);  // publishes the fields above
  Header& h = header();
  h.requests.fetch_add(1);
  if (h.server_waiting.load() != 0) futex_wake(h.requests);
}

bool RequestRing::done(uint32_t index) const { return slot(index).state.load() == kDone; }

RequestRing::Wait RequestRing::wait_done(uint32_t index, int64_t deadline_ns, const PeerAlive& peer_alive) const {
  const Slot& s = slot(index);
  Header& h = header();
  return wait_for([&] { return s.state.load() == kDone; }, h.responses, h.clients_waiting, deadline_ns,
                  [this] { return client_stopped_.load(); }, peer_alive);
}

uint32_t RequestRing::responses() const { return header().responses.load(); }

RequestRing::Wait RequestRing::wait_any(uint32_t seen, int64_t deadline_ns, const PeerAlive& peer_alive) const {
  Header& h = header();
  return wait_for([&] { return h.responses.load() != seen; }, h.responses, h.clients_waiting, deadline_ns,
                  [this] { return client_stopped_.load(); }, peer_alive);
}

RequestRing::Response RequestRing::response(uint32_t index) const {
  const Slot& s = slot(index);
  if (s.state.load() != kDone) throw Error("request ring slot " + std::to_string(index) + " has no response yet");
  Response r;
  r.status = static_cast<Status>(s.status);
  r.request_id = s.request_id;
  r.offset = s.response_offset;
  r.bytes = s.response_bytes;
  r.needed_bytes = s.needed_bytes;
  // Compared without adding: the server's numbers may be anything.
  if (r.offset > slot_bytes_ || r.bytes > slot_bytes_ - r.offset) throw Error("a ring response lies outside its slot");
  return r;
}

void RequestRing::release(uint32_t index) {
  slot(index).state.store(kFree);
  {
    std::lock_guard lock(client_mutex_);
    held_[index] = false;
  }
  slot_freed_.notify_one();
}

void RequestRing::stop_client() {
  {
    std::lock_guard lock(client_mutex_);
    client_stopped_ = true;
  }
  slot_freed_.notify_all();
  Header& h = header();
  h.responses.fetch_add(1);
  futex_wake(h.responses);
}

// --- the server's side ---

std::optional<uint32_t> RequestRing::next_request(const std::atomic<bool>& stop) {
  Header& h = header();
  std::optional<uint32_t> taken;
  const auto take = [&] {
    for (uint32_t n = 0; n < slot_count_; ++n) {
      const uint32_t i = (next_scan_ + n) % slot_count_;
      uint32_t expected = kSubmitted;
      if (slot(i).state.compare_exchange_strong(expected, kWorking)) {
        next_scan_ = (i + 1) % slot_count_;
        taken = i;
        return true;
      }
    }
    return false;
  };
  while (!taken) {
    const Wait w = wait_for(take, h.requests, h.server_waiting, kNoDeadline,
                            [&] { return stop.load() || h.retired.load() != 0; }, {});
    if (w == Wait::stopped) return std::nullopt;
  }
  return taken;
}

RequestRing::Request RequestRing::request(uint32_t index) const {
  const Slot& s = slot(index);
  Request r;
  r.request_id = s.request_id;
  r.tag.assign(s.tag, strnlen(s.tag, kTagBytes));
  r.bytes = s.request_bytes;
  if (r.bytes > slot_bytes_) throw Error("a ring request claims more bytes than its slot holds");
  return r;
}

void RequestRing::respond(uint32_t index, Status status, size_t offset, size_t bytes, size_t needed_bytes) {
  Slot& s = slot(index);
  s.status = static_cast<uint32_t>(status);
  s.response_offset = offset;
  s.response_bytes = bytes;
  s.needed_bytes = needed_bytes;
  s.state.store(kDone);
  Header& h = header();
  h.responses.fetch_add(1);
  if (h.clients_waiting.load() != 0) futex_wake(h.responses);
}

void RequestRing::retire() {
  Header& h = header();
  h.retired.store(1);
  h.requests.fetch_add(1);
  futex_wake(h.requests);
}

bool RequestRing::retired() const { return header().retired.load() != 0; }

}  // namespace ortfleet::detail
