#include "base/parallel_copy.hpp"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace ortfleet::detail {
namespace {
// The memory bus is shared: beyond a handful of threads a copy goes no faster.
constexpr size_t kMaxThreads = 8;
constexpr size_t kChunkAlignment = 64;
}  // namespace

void split_across_threads(size_t bytes, const std::function<void(size_t offset, size_t length)>& work,
                          size_t min_bytes_per_thread) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min({kMaxThreads, cores, bytes / std::max<size_t>(min_bytes_per_thread, 1)});
  if (threads <= 1) {
    if (bytes > 0) work(0, bytes);
    return;
  }
  const size_t piece = (bytes / threads + kChunkAlignment - 1) / kChunkAlignment * kChunkAlignment;
  std::vector<std::jthread> helpers;  // joined when they go out of scope
  for (size_t offset = piece; offset < bytes; offset += piece) {
    const size_t length = std::min(piece, bytes - offset);
    helpers.emplace_back([&work, offset, length] { work(offset, length); });
  }
  work(0, std::min(piece, bytes));
}

void parallel_copy(void* dst, const void* src, size_t bytes) {
  auto* to = static_cast<std::byte*>(dst);
  const auto* from = static_cast<const std::byte*>(src);
  split_across_threads(bytes, [=](size_t offset, size_t length) { std::memcpy(to + offset, from + offset, length); });
}

}  // namespace ortfleet::detail
