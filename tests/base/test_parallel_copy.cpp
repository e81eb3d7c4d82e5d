#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <cstdint>
#include <vector>

#include "base/parallel_copy.hpp"

namespace ortfleet::detail {

// Sizes around the points where the copy splits: nothing, one byte, just under and over one
// thread's share, and an odd size that leaves a short last chunk.
TEST(ParallelCopy, EveryByteArrivesWhateverTheSize) {
  for (const size_t bytes : {size_t{0}, size_t{1}, (size_t{2} << 20) - 1, (size_t{4} << 20) + 3, (size_t{37} << 20) + 4097}) {
    std::vector<uint8_t> from(bytes);
    for (size_t i = 0; i < bytes; ++i) from[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
    std::vector<uint8_t> to(bytes + 1, 0xAB);  // one guard byte after the end
    parallel_copy(to.data(), from.data(), bytes);
    ASSERT_TRUE(std::equal(from.begin(), from.end(), to.begin())) << bytes << " bytes";
    EXPECT_EQ(to[bytes], 0xAB) << "wrote past the end of " << bytes << " bytes";
  }
}

// The pieces tile the range: sorted, each starts where the last ended, and the last ends at the end.
// Small ranges stay one piece on the caller's thread.
TEST(ParallelCopy, SplitAcrossThreadsCoversTheRangeOnce) {
  for (const size_t bytes : {size_t{0}, size_t{100}, (size_t{2} << 20) - 1, (size_t{9} << 20) + 7, (size_t{40} << 20) + 1}) {
    std::mutex lock;
    std::vector<std::pair<size_t, size_t>> pieces;
    const auto caller = std::this_thread::get_id();
    bool small_left_the_caller = false;
    split_across_threads(bytes, [&](size_t offset, size_t length) {
      const std::lock_guard hold(lock);
      pieces.emplace_back(offset, length);
      if (bytes < (size_t{2} << 20) && std::this_thread::get_id() != caller) small_left_the_caller = true;
    });
    std::sort(pieces.begin(), pieces.end());
    size_t end = 0;
    for (const auto& [offset, length] : pieces) {
      EXPECT_EQ(offset, end) << bytes << " bytes: a gap or an overlap";
      end = offset + length;
    }
    EXPECT_EQ(end, bytes);
    if (bytes < (size_t{2} << 20)) {
      EXPECT_LE(pieces.size(), 1u);
    }
    EXPECT_FALSE(small_left_the_caller);
  }
}

// A smaller minimum piece splits a smaller range: 3 MiB in pieces of 512 KiB and up.
TEST(ParallelCopy, ASmallerMinimumPieceSplitsSmallerRanges) {
  const size_t bytes = size_t{3} << 20;
  std::mutex lock;
  std::vector<std::pair<size_t, size_t>> pieces;
  split_across_threads(
      bytes,
      [&](size_t offset, size_t length) {
        const std::lock_guard hold(lock);
        pieces.emplace_back(offset, length);
      },
      size_t{512} << 10);
  std::sort(pieces.begin(), pieces.end());
  size_t end = 0;
  for (const auto& [offset, length] : pieces) {
    EXPECT_EQ(offset, end);
    end = offset + length;
  }
  EXPECT_EQ(end, bytes);
  if (std::thread::hardware_concurrency() >= 2) {
    EXPECT_GE(pieces.size(), 2u);
  }
  EXPECT_LE(pieces.size(), 6u);
}

}  // namespace ortfleet::detail
