#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/content_hash.hpp"

namespace ortfleet::detail {

namespace {
uint64_t of(const std::string& text, uint64_t seed = 0) { return xxh64(text.data(), text.size(), seed); }
}  // namespace

// Published XXH64 values (xxhsum, python-xxhash): every branch of the algorithm, from the empty input
// to several 32-byte stripes with 8-, 4- and 1-byte tails.
TEST(ContentHash, MatchesTheReferenceXxh64) {
  EXPECT_EQ(of(""), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(of("a"), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(of("abc"), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(of("abc", 12345), 0x01700E64F6F23509ULL);
  EXPECT_EQ(of(std::string(32, 'a')), 0x856E843298F99AD7ULL);
  EXPECT_EQ(of("Nobody inspects the spammish repetition"), 0xFBCEA83C8A378BF1ULL);
  EXPECT_EQ(of("The quick brown fox jumps over the lazy dog"), 0x0B242D361FDA71BCULL);
  EXPECT_EQ(hex64(0x0B242D361FDA71BCULL), "0b242d361fda71bc");
}

TEST(ContentHash, DoesNotDependOnAlignmentAndSeesEveryByte) {
  std::vector<unsigned char> bytes(4099);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 131 + 7);
  std::vector<unsigned char> shifted(bytes.size() + 1);
  std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
  const uint64_t h = xxh64(bytes.data(), bytes.size());
  EXPECT_EQ(xxh64(shifted.data() + 1, bytes.size()), h);
  for (size_t at : {size_t{0}, size_t{31}, size_t{2048}, bytes.size() - 1}) {
    bytes[at] ^= 0x01;
    EXPECT_NE(xxh64(bytes.data(), bytes.size()), h) << "a flipped bit at byte " << at << " went unseen";
    bytes[at] ^= 0x01;
  }
}

}  // namespace ortfleet::detail
