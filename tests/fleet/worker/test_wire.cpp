#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "fleet/worker/wire.hpp"
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

TEST(Wire, ARingMessageRoundTripsWithHostTensorsReferencesAndReleasedLeases) {
  const float x[] = {1.5f, -2.0f, 3.25f};
  RingMessage sent = host_message({Tensor::host_copy("x", ElementType::float32, {3}, x)});
  CudaIpcRef ref;
  for (size_t i = 0; i < ref.handle.size(); ++i) ref.handle[i] = static_cast<std::byte>(i * 7);
  ref.offset = 4096;
  ref.lease = 42;
  Tensor on_gpu = Tensor::borrow("y", ElementType::int64, {2, 5}, nullptr, Device::cuda(3));
  on_gpu.bytes = 80;
  sent.tensors.push_back({on_gpu, ref});
  sent.outputs_on_device = true;
  sent.released = {5, 9, 11};
  std::vector<std::byte> area(ring_message_bytes(sent));
  ASSERT_EQ(write_ring_message(sent, area.data(), area.size()), area.size());

  const RingMessage back = read_ring_message(area.data(), area.size(), nullptr);
  EXPECT_TRUE(back.outputs_on_device);
  EXPECT_EQ(back.released, (std::vector<uint64_t>{5, 9, 11}));
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_FALSE(back.tensors[0].ipc);
  EXPECT_EQ(back.tensors[0].tensor.values<float>()[2], 3.25f);
  const auto& [y, y_ref] = back.tensors[1];
  ASSERT_TRUE(y_ref);
  EXPECT_EQ(y.name, "y");
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(y.bytes, 80u);
  EXPECT_EQ(y.device, Device::cuda(3));
  EXPECT_EQ(y.data, nullptr);  // mapped by the receiver
  EXPECT_EQ(y_ref->handle, ref.handle);
  EXPECT_EQ(y_ref->offset, 4096u);
  EXPECT_EQ(y_ref->lease, 42u);
}

TEST(Wire, ADeviceTensorWithoutAReferenceIsNotWrittenAsBytes) {
  Tensor on_gpu = Tensor::borrow("y", ElementType::float32, {1}, nullptr, Device::cuda(0));
  const RingMessage message = host_message({on_gpu});
  std::vector<std::byte> area(ring_message_bytes(message) + 64);
  EXPECT_THROW(write_ring_message(message, area.data(), area.size()), Error);
}

TEST(Wire, AMalformedRingMessageIsRejected) {
  const float x[] = {1.0f};
  RingMessage sent = host_message({Tensor::host_copy("x", ElementType::float32, {1}, x)});
  sent.released = {1};
  std::vector<std::byte> area(ring_message_bytes(sent));
  write_ring_message(sent, area.data(), area.size());
  // More released leases than the area holds.
  auto too_many = area;
  const uint32_t huge = 1u << 30;
  std::memcpy(too_many.data() + 12, &huge, sizeof(huge));
  EXPECT_THROW(read_ring_message(too_many.data(), too_many.size(), nullptr), Error);
  // A tensor said to lie somewhere unknown (its entry's location word).
  auto nowhere = area;
  const uint32_t unknown = 7;
  std::memcpy(nowhere.data() + 16 + sizeof(uint64_t) + 12, &unknown, sizeof(unknown));
  EXPECT_THROW(read_ring_message(nowhere.data(), nowhere.size(), nullptr), Error);
  // Cut short.
  EXPECT_THROW(read_ring_message(area.data(), 20, nullptr), Error);
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

// ONNX Runtime's warnings cross from a worker to its parent with any reply; what is malformed is
// skipped, never an error.
TEST(Wire, OrtWarningsRoundTripAndMalformedEntriesAreSkipped) {
  const std::vector<OrtWarningCount> warnings = {{"Some nodes were not assigned", 3}, {"Removing initializer 'w'", 1}};
  EXPECT_EQ(ort_warnings_from_json(ort_warnings_to_json(warnings)), warnings);
  const auto odd = nlohmann::json::parse(R"([["ok", 2], ["no count"], [5, 1], ["negative", -1], "text", ["big", 1e300]])");
  EXPECT_EQ(ort_warnings_from_json(odd), (std::vector<OrtWarningCount>{{"ok", 2}}));
  EXPECT_TRUE(ort_warnings_from_json(nlohmann::json::object()).empty());
}

}  // namespace ortfleet::detail
