#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "process/ipc.hpp"
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
  auto m1 = right.receive();
  auto m2 = right.receive();
  ASSERT_TRUE(m1 && m2);
  EXPECT_EQ(m1->body.at("op"), "first");
  EXPECT_TRUE(m1->fds.empty());
  EXPECT_EQ(m2->body.at("n"), 2);
  ASSERT_EQ(m2->fds.size(), 1u);
  auto seen = SharedBuffer::attach(std::move(m2->fds[0]));
  EXPECT_STREQ(reinterpret_cast<const char*>(seen->data()), "shared!");
}

TEST(Ipc, ReceiveReportsTheClosedEnd) {
  auto [a, b] = MessageChannel::socket_pair();
  MessageChannel right(std::move(b));
  { UniqueFd gone = std::move(a); }
  EXPECT_FALSE(right.receive().has_value());
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
