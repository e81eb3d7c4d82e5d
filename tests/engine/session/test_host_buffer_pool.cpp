// detail::HostBufferPool: buffers come back when the last copy of a tensor goes, and are handed out again.
#include "engine/session/host_buffer_pool.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <stdexcept>

namespace ortfleet::detail {
namespace {

TEST(HostBufferPool, AReleasedBufferIsHandedOutAgainAndAHeldOneIsNot) {
  HostBufferPool pool;
  void* first = nullptr;
  {
    Tensor a = pool.allocate("y", ElementType::float32, {2, 1000});
    EXPECT_EQ(a.bytes, 8000u);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 1000}));
    std::memset(a.data, 1, a.bytes);
    first = a.data;
    Tensor held = pool.allocate("y", ElementType::float32, {2, 1000});
    EXPECT_NE(held.data, first) << "a buffer still held by a tensor was handed out again";
    EXPECT_EQ(pool.free_buffers(), 0u);
  }
  EXPECT_EQ(pool.free_buffers(), 2u);
  Tensor again = pool.allocate("y", ElementType::float32, {1, 1000});  // smaller: a kept buffer fits
  EXPECT_TRUE(again.data != nullptr);
  EXPECT_EQ(again.bytes, 4000u);
  EXPECT_EQ(pool.free_buffers(), 1u);
}

TEST(HostBufferPool, AReservedBufferServesTheFirstCallAndTooSmallOnesAreNotUsed) {
  HostBufferPool pool;
  pool.reserve(1 << 20);
  EXPECT_EQ(pool.free_bytes(), size_t{1} << 20);
  Tensor big = pool.allocate("y", ElementType::float32, {1, 1 << 19});  // 2 MB: more than the reserve
  EXPECT_EQ(pool.free_buffers(), 1u) << "the 1 MB buffer cannot hold 2 MB";
  Tensor fits = pool.allocate("y", ElementType::uint8, {1000, 1000});
  EXPECT_EQ(pool.free_buffers(), 0u) << "the reserved buffer should serve a 1 MB output";
}

TEST(HostBufferPool, TensorsOutliveThePoolAndTheShelfKeepsNoMoreThanItsLimit) {
  std::optional<Tensor> kept;
  {
    HostBufferPool pool;
    kept = pool.allocate("y", ElementType::float32, {16});
    std::memset(kept->data, 0, kept->bytes);
  }
  kept.reset();  // its memory is freed with it: no pool to return to (ASan and valgrind see a leak or a use after free)

  HostBufferPool pool;
  std::vector<Tensor> many;
  for (int i = 0; i < 3; ++i) many.push_back(pool.allocate("y", ElementType::uint8, {100 << 20}));
  many.clear();
  EXPECT_EQ(pool.free_buffers(), 2u) << "256 MB by default: a third 100 MB buffer is freed, not kept";
}

}  // namespace
}  // namespace ortfleet::detail

namespace ortfleet::detail {
namespace {

TEST(HostBufferPool, AReservedBufferKeepsItsPinAndOneThePinRefusesIsStillUsed) {
  auto token = std::make_shared<int>(7);
  std::weak_ptr<int> pinned = token;
  {
    HostBufferPool pool;
    size_t pinned_bytes = 0;
    pool.reserve(10000, [&](void* pointer, size_t bytes) -> std::shared_ptr<void> {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(pointer) % 4096, 0u) << "a pin covers whole pages";
      pinned_bytes = bytes;
      return std::move(token);
    });
    EXPECT_EQ(pinned_bytes % 4096, 0u);
    EXPECT_GE(pinned_bytes, 10000u);
    EXPECT_EQ(pool.free_pinned(), 1u);
    {
      Tensor out = pool.allocate("y", ElementType::float32, {2500});
      EXPECT_EQ(pool.free_pinned(), 0u);
    }
    EXPECT_EQ(pool.free_pinned(), 1u) << "the pin comes back with its buffer";
    EXPECT_FALSE(pinned.expired());

    pool.reserve(20000, [](void*, size_t) -> std::shared_ptr<void> { throw std::runtime_error("locked-memory limit"); });
    EXPECT_EQ(pool.free_buffers(), 2u) << "a buffer the pin refused is kept, unpinned";
    EXPECT_EQ(pool.free_pinned(), 1u);
  }
  EXPECT_TRUE(pinned.expired()) << "the pin ends with the pool's last buffer";
}

}  // namespace
}  // namespace ortfleet::detail
