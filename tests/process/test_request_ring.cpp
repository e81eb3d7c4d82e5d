#include "process/request_ring.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {
namespace {

using Wait = RequestRing::Wait;

std::shared_ptr<RequestRing> server_side(const RequestRing& client) { return RequestRing::attach(UniqueFd(::dup(client.fd()))); }

/// Serves `ring` on a thread of its own (through its own mapping, as a worker would): each response
/// is the request's bytes reversed, after the request, tagged with the request's tag.
class EchoServer {
 public:
  explicit EchoServer(std::shared_ptr<RequestRing> ring) : ring_(std::move(ring)), thread_([this] { loop(); }) {}
  ~EchoServer() {
    stop_ = true;
    ring_->retire();
    thread_.join();
  }
  int served() const { return served_.load(); }

 private:
  void loop() {
    while (const auto slot = ring_->next_request(stop_)) {
      const auto request = ring_->request(*slot);
      std::byte* area = ring_->data(*slot);
      const size_t offset = (request.bytes + 63) / 64 * 64;
      const size_t bytes = request.bytes + request.tag.size();
      if (offset + bytes > ring_->slot_bytes()) {
        ring_->respond(*slot, RequestRing::Status::response_too_large, 0, 0, offset + bytes);
        continue;
      }
      for (size_t i = 0; i < request.bytes; ++i) area[offset + i] = area[request.bytes - 1 - i];
      std::memcpy(area + offset + request.bytes, request.tag.data(), request.tag.size());
      ++served_;  // before the answer: a client that has its answer may read the count at once
      ring_->respond(*slot, RequestRing::Status::ok, offset, bytes);
    }
  }
  std::shared_ptr<RequestRing> ring_;
  std::atomic<bool> stop_{false};
  std::atomic<int> served_{0};
  std::thread thread_;
};

std::string payload(int n, size_t bytes) {
  std::string s;
  while (s.size() < bytes) s += "<" + std::to_string(n) + ">";
  s.resize(bytes);
  return s;
}

/// Submits `text` and waits for the echo; the response as text.
std::string round_trip(RequestRing& ring, uint64_t id, const std::string& tag, const std::string& text) {
  const auto slot = ring.acquire();
  if (!slot) throw Error("no slot");
  std::memcpy(ring.data(*slot), text.data(), text.size());
  ring.submit(*slot, id, tag, text.size());
  if (ring.wait_done(*slot, deadline_in(60, monotonic_ns()), {}) != Wait::done) throw Error("no answer");
  const auto response = ring.response(*slot);
  EXPECT_EQ(response.request_id, id);
  EXPECT_EQ(response.status, RequestRing::Status::ok);
  std::string out(reinterpret_cast<const char*>(ring.data(*slot) + response.offset), response.bytes);
  ring.release(*slot);
  return out;
}

std::string reversed(std::string s) { return {s.rbegin(), s.rend()}; }

TEST(RequestRing, ServesManyMoreRequestsThanItHasSlots) {
  auto ring = RequestRing::create(2, 4096);
  EchoServer server(server_side(*ring));
  for (int i = 0; i < 500; ++i) {
    const std::string text = payload(i, 1 + static_cast<size_t>(i * 7) % 1500);
    ASSERT_EQ(round_trip(*ring, static_cast<uint64_t>(i), "s" + std::to_string(i % 3), text),
              reversed(text) + "s" + std::to_string(i % 3));
  }
  EXPECT_EQ(server.served(), 500);
}

TEST(RequestRing, ManyThreadsShareItsSlots) {
  auto ring = RequestRing::create(3, 8192);
  EchoServer server(server_side(*ring));
  std::atomic<uint64_t> next_id{1};
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string text = payload(t * 1000 + i, 16 + static_cast<size_t>(i % 40) * 50);
        const std::string tag = "thread" + std::to_string(t);
        if (round_trip(*ring, next_id.fetch_add(1), tag, text) != reversed(text) + tag) ++wrong;
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(server.served(), 6 * 200);
}

TEST(RequestRing, ARequestInFlightPerSlotIsAnsweredInAnyOrder) {
  // Every slot submitted before any is waited for: the pipelining a client without threads gets.
  auto ring = RequestRing::create(4, 4096);
  EchoServer server(server_side(*ring));
  std::vector<uint32_t> slots;
  for (int i = 0; i < 4; ++i) {
    const auto slot = ring->acquire();
    ASSERT_TRUE(slot);
    const std::string text = payload(i, 100);
    std::memcpy(ring->data(*slot), text.data(), text.size());
    ring->submit(*slot, 10 + static_cast<uint64_t>(i), "", text.size());
    slots.push_back(*slot);
  }
  for (int i = 3; i >= 0; --i) {
    ASSERT_EQ(ring->wait_done(slots[static_cast<size_t>(i)], deadline_in(60, monotonic_ns()), {}), Wait::done);
    const auto response = ring->response(slots[static_cast<size_t>(i)]);
    EXPECT_EQ(response.request_id, 10u + static_cast<uint64_t>(i));
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(ring->data(slots[static_cast<size_t>(i)]) + response.offset), response.bytes),
              reversed(payload(i, 100)));
    ring->release(slots[static_cast<size_t>(i)]);
  }
}

TEST(RequestRing, AResponseTooLargeForItsSlotSaysHowMuchItNeeds) {
  auto ring = RequestRing::create(1, 4096);
  EchoServer server(server_side(*ring));
  const auto slot = ring->acquire();
  ASSERT_TRUE(slot);
  ring->submit(*slot, 1, "", 3000);  // the echo needs 3008 + 3000 bytes
  ASSERT_EQ(ring->wait_done(*slot, deadline_in(60, monotonic_ns()), {}), Wait::done);
  const auto response = ring->response(*slot);
  EXPECT_EQ(response.status, RequestRing::Status::response_too_large);
  EXPECT_EQ(response.needed_bytes, 6008u);
  ring->release(*slot);
  EXPECT_THROW(ring->submit(0, 2, "", ring->slot_bytes() + 1), Error);  // a request larger than a slot is refused
}

TEST(RequestRing, AWaitWithoutAnAnswerEndsAtItsDeadline) {
  auto ring = RequestRing::create(1, 4096);
  const auto slot = ring->acquire();
  ASSERT_TRUE(slot);
  ring->submit(*slot, 1, "", 10);
  EXPECT_EQ(ring->wait_done(*slot, monotonic_ns() + 20'000'000, [] { return true; }), Wait::timed_out);
  EXPECT_EQ(ring->wait_any(ring->responses(), monotonic_ns() + 20'000'000, {}), Wait::timed_out);
}

TEST(RequestRing, APeerKilledMidRequestEndsTheWait) {
  auto ring = RequestRing::create(2, 4096);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The server takes the request, then dies before it answers.
    auto mine = server_side(*ring);
    std::atomic<bool> stop{false};
    if (mine->next_request(stop)) ::raise(SIGKILL);
    ::_exit(3);
  }
  const auto slot = ring->acquire();
  ASSERT_TRUE(slot);
  ring->submit(*slot, 1, "", 10);
  int status = 0;
  bool reaped = false;
  const auto alive = [&] {
    if (!reaped && ::waitpid(child, &status, WNOHANG) == child) reaped = true;
    return !reaped;
  };
  EXPECT_EQ(ring->wait_done(*slot, deadline_in(120, monotonic_ns()), alive), Wait::peer_gone);
  ASSERT_TRUE(reaped);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the server did not take the request";
}

TEST(RequestRing, StoppingTheClientWakesItsWaiters) {
  auto ring = RequestRing::create(1, 4096);
  const auto slot = ring->acquire();
  ASSERT_TRUE(slot);
  ring->submit(*slot, 1, "", 10);
  Wait done_wait = Wait::done;
  Wait any_wait = Wait::done;
  std::optional<uint32_t> second;
  std::thread waiter([&] { done_wait = ring->wait_done(*slot, kNoDeadline, {}); });
  std::thread any([&] { any_wait = ring->wait_any(ring->responses(), kNoDeadline, {}); });
  std::thread acquirer([&] { second = ring->acquire(); });  // the only slot is taken: it waits
  ring->stop_client();
  waiter.join();
  any.join();
  acquirer.join();
  EXPECT_EQ(done_wait, Wait::stopped);
  EXPECT_NE(any_wait, Wait::timed_out);
  EXPECT_FALSE(second.has_value());
}

TEST(RequestRing, AServerStopsWhenTheRingIsRetired) {
  auto ring = RequestRing::create(1, 4096);
  auto server = server_side(*ring);
  std::atomic<bool> stop{false};
  std::optional<uint32_t> got = 0;
  std::thread t([&] { got = server->next_request(stop); });
  ring->retire();
  t.join();
  EXPECT_FALSE(got.has_value());
  EXPECT_TRUE(server->retired());
}

TEST(RequestRing, AttachRefusesMemoryThatIsNoRing) {
  auto buffer = SharedBuffer::create(8192);
  std::memset(buffer->data(), 0x5a, buffer->size());
  EXPECT_THROW(RequestRing::attach(UniqueFd(::dup(buffer->fd()))), Error);
  EXPECT_THROW(RequestRing::create(0, 4096), Error);
  EXPECT_THROW(RequestRing::create(2, SIZE_MAX / 2), Error);
}

TEST(RequestRing, ATagLongerThanItsFieldIsRefused) {
  auto ring = RequestRing::create(1, 4096);
  EXPECT_THROW(ring->submit(0, 1, std::string(RequestRing::kTagBytes, 'x'), 1), Error);
}

}  // namespace
}  // namespace ortfleet::detail
