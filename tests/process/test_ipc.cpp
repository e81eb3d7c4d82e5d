#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "process/ipc.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

TEST(Ipc, MessagesKeepTheirBoundariesAndCarryDescriptors) {
  auto [a, b] = MessageChannel::socket_pair();
  MessageChannel left(std::move(a));
  MessageChannel right(std::move(b));
  auto buffer = SharedBuffer::create(4096);
  std::memcpy(buffer->data(), "shared!", 8);
  left.send({{"op", "first"}});
  left.send({{"op", "second"}, {"n", 2}}, {buffer->fd()});
  auto r1 = right.receive();
  auto r2 = right.receive();
  ASSERT_EQ(r1.kind, Received::Kind::message);
  ASSERT_EQ(r2.kind, Received::Kind::message);
  const Message& m1 = r1.message;
  Message& m2 = r2.message;
  EXPECT_EQ(m1.body.at("op"), "first");
  EXPECT_TRUE(m1.fds.empty());
  EXPECT_EQ(m2.body.at("n"), 2);
  ASSERT_EQ(m2.fds.size(), 1u);
  auto seen = SharedBuffer::attach(std::move(m2.fds[0]));
  EXPECT_STREQ(reinterpret_cast<const char*>(seen->data()), "shared!");
}

TEST(Ipc, ReceiveReportsTheClosedEnd) {
  auto [a, b] = MessageChannel::socket_pair();
  MessageChannel right(std::move(b));
  { UniqueFd gone = std::move(a); }
  EXPECT_EQ(right.receive().kind, Received::Kind::closed);
}

TEST(Ipc, ASilentPeerTimesOutAtTheDeadlineAndAClosedOneIsToldApart) {
  auto [a, b] = MessageChannel::socket_pair();
  MessageChannel left(std::move(a));
  MessageChannel right(std::move(b));
  // Nothing sent: the deadline ends the wait (a deadline already past polls once).
  EXPECT_EQ(right.receive(monotonic_ns()).kind, Received::Kind::timed_out);
  EXPECT_EQ(right.receive(deadline_in(0.05, monotonic_ns())).kind, Received::Kind::timed_out);
  // A message waiting is taken even when the deadline has passed.
  left.send({{"op", "late"}});
  const auto got = right.receive(monotonic_ns());
  ASSERT_EQ(got.kind, Received::Kind::message);
  EXPECT_EQ(got.message.body.at("op"), "late");
  { MessageChannel closing = std::move(left); }
  EXPECT_EQ(right.receive(deadline_in(10, monotonic_ns())).kind, Received::Kind::closed);
}

TEST(Ipc, DeadlinesPastTheClockEndMeanNone) {
  EXPECT_EQ(deadline_in(std::numeric_limits<double>::infinity(), monotonic_ns()), kNoDeadline);
  EXPECT_EQ(deadline_in(1e30, monotonic_ns()), kNoDeadline);
  EXPECT_EQ(deadline_in(2, 1'000), 2'000'001'000);
}

TEST(Ipc, ABufferReceivedAgainIsMappedOnce) {
  auto first = SharedBuffer::create(4096);
  auto second = SharedBuffer::create(4096);
  ReceivedBuffer received;
  auto a = received.map(UniqueFd(::dup(first->fd())));
  auto b = received.map(UniqueFd(::dup(first->fd())));
  EXPECT_EQ(a.get(), b.get());  // the same memfd: the same mapping
  auto c = received.map(UniqueFd(::dup(second->fd())));
  EXPECT_NE(c.get(), a.get());
  std::memcpy(second->data(), "x", 2);
  EXPECT_STREQ(reinterpret_cast<const char*>(c->data()), "x");
}

}  // namespace ortfleet::detail
