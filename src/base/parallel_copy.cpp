#include "base/parallel_copy.hpp"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace ortfleet::detail {
namespace {
// Below this per thread, starting a thread (tens of microseconds) costs more than it saves.
constexpr size_t kMinBytesPerThread = size_t{2} << 20;
// The memory bus is shared: beyond a handful of threads a copy goes no faster.
constexpr size_t kMaxThreads = 8;
constexpr size_t kChunkAlignment = 64;
}  // namespace

void parallel_copy(void* dst, const void* src, size_t bytes) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min({kMaxThreads, cores, bytes / kMinBytesPerThread});
  if (threads <= 1) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  auto* to = static_cast<std::byte*>(dst);
  const auto* from = static_cast<const std::byte*>(src);
  const size_t chunk = (bytes / threads + kChunkAlignment - 1) / kChunkAlignment * kChunkAlignment;
  std::vector<std::jthread> helpers;  // joined when they go out of scope
  for (size_t offset = chunk; offset < bytes; offset += chunk) {
    const size_t length = std::min(chunk, bytes - offset);
    helpers.emplace_back([=] { std::memcpy(to + offset, from + offset, length); });
  }
  std::memcpy(to, from, std::min(chunk, bytes));
}

}  // namespace ortfleet::detail
