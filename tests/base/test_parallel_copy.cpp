#include <gtest/gtest.h>

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

}  // namespace ortfleet::detail
