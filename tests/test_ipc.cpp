#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "ipc.hpp"
#include "ortfleet/error.hpp"

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

TEST(Ipc, TensorsRoundTripThroughSharedMemory) {
  const float x[] = {1.5f, -2.0f, 3.25f};
  const int64_t ids[] = {7, 8};
  std::vector<Tensor> tensors = {Tensor::host_copy("x", ElementType::float32, {3}, x),
                                 Tensor::host_copy("ids", ElementType::int64, {1, 2}, ids)};
  std::shared_ptr<SharedBuffer> buffer;
  const auto described = pack_tensors(tensors, buffer);
  const auto back = unpack_tensors(described, SharedBuffer::attach(UniqueFd(::dup(buffer->fd()))));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].name, "x");
  EXPECT_EQ(back[0].values<float>()[2], 3.25f);
  EXPECT_EQ(back[1].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(back[1].values<int64_t>()[1], 8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(back[1].data) % 64, 0u);  // aligned for any element type
}

TEST(Ipc, DescriptionsThatDoNotFitTheBufferAreRejected) {
  auto buffer = SharedBuffer::create(64);
  const nlohmann::json outside = nlohmann::json::array({{{"name", "x"}, {"type", 1}, {"shape", {100}}, {"offset", 0}, {"bytes", 400}}});
  EXPECT_THROW(unpack_tensors(outside, buffer), Error);
  const nlohmann::json mismatch = nlohmann::json::array({{{"name", "x"}, {"type", 1}, {"shape", {3}}, {"offset", 0}, {"bytes", 8}}});
  EXPECT_THROW(unpack_tensors(mismatch, buffer), Error);
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
