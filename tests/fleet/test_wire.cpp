#include <gtest/gtest.h>
#include <unistd.h>

#include "fleet/wire.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

TEST(Wire, TensorsRoundTripThroughSharedMemory) {
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

TEST(Wire, DescriptionsThatDoNotFitTheBufferAreRejected) {
  auto buffer = SharedBuffer::create(64);
  const nlohmann::json outside = nlohmann::json::array({{{"name", "x"}, {"type", 1}, {"shape", {100}}, {"offset", 0}, {"bytes", 400}}});
  EXPECT_THROW(unpack_tensors(outside, buffer), Error);
  const nlohmann::json mismatch = nlohmann::json::array({{{"name", "x"}, {"type", 1}, {"shape", {3}}, {"offset", 0}, {"bytes", 8}}});
  EXPECT_THROW(unpack_tensors(mismatch, buffer), Error);
}

TEST(Wire, AnErrorKeepsItsPartsAcrossTheWire) {
  const Error sent("creating the session failed: out of memory", "Free memory on the GPU", "cuda:1");
  const Error back = error_from_json(nlohmann::json::parse(error_to_json(sent).dump()), "cuda:0");
  EXPECT_EQ(back.what_failed(), sent.what_failed());
  EXPECT_EQ(back.hint(), sent.hint());
  EXPECT_EQ(back.where(), "cuda:1");  // the sender's device wins over the receiver's guess
  EXPECT_EQ(std::string(back.what()), std::string(sent.what()));
}

TEST(Wire, AnErrorWithoutADeviceIsPlacedByTheReceiver) {
  const Error back = error_from_json(error_to_json(std::runtime_error("boom")), "cpu");
  EXPECT_EQ(back.what_failed(), "boom");
  EXPECT_EQ(back.where(), "cpu");
  EXPECT_EQ(std::string(back.what()), "boom (on cpu)");
}

TEST(Wire, ADeviceStatusRoundTrips) {
  DeviceStatus s;
  s.device = Device::cuda(3);
  s.state = DeviceState::ready;
  s.provider = "plugin";
  s.ready_ns = 1234;
  s.ready_ms = 5.5;
  s.pid = 42;
  s.memory_bytes = 1ull << 33;
  const DeviceStatus back = status_from_json(nlohmann::json::parse(status_to_json(s).dump()));
  EXPECT_EQ(back.device, s.device);
  EXPECT_EQ(back.state, DeviceState::ready);
  EXPECT_EQ(back.provider, "plugin");
  EXPECT_EQ(back.ready_ns, 1234);
  EXPECT_EQ(back.pid, 42);
  EXPECT_EQ(back.memory_bytes, 1ull << 33);
}

}  // namespace ortfleet::detail
