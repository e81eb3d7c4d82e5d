#pragma once
// A fast content hash for files of any size: XXH64 (the xxHash 64-bit algorithm, reference vectors in
// tests/base/test_content_hash.cpp). Word at a time, four independent lanes: it runs at memory
// speed, so hashing a model costs about what reading it from the page cache does.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ortfleet::detail {

uint64_t xxh64(const void* data, size_t size, uint64_t seed = 0);

/// 16 lower-case hex digits.
std::string hex64(uint64_t value);

}  // namespace ortfleet::detail
