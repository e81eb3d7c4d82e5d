#include "engine/session/host_buffer_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

namespace {
// Enough for a few large outputs in flight; a reserve() raises it to twice what was reserved.
constexpr size_t kDefaultLimitBytes = size_t{256} << 20;
constexpr size_t kPageBytes = 4096;  // a pin covers whole pages: buffers start on one and fill their last
}  // namespace

/// Page-aligned memory, and the pin on it when there is one (released before the memory is freed).
struct HostBufferPool::Buffer {
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  explicit Buffer(size_t bytes) : capacity((std::max<size_t>(bytes, 1) + kPageBytes - 1) / kPageBytes * kPageBytes) {
    memory.reset(static_cast<std::byte*>(std::aligned_alloc(kPageBytes, capacity)));
    if (!memory) throw std::bad_alloc();
  }
  size_t capacity;
  std::unique_ptr<std::byte, Free> memory;
  std::shared_ptr<void> pin;  // declared after the memory: ends first
};

HostBufferPool::HostBufferPool() : shelf_(std::make_shared<Shelf>()) { shelf_->limit_bytes = kDefaultLimitBytes; }

Tensor HostBufferPool::allocate(std::string name, ElementType type, std::vector<int64_t> shape) {
  Tensor t;
  t.type = type;
  t.shape = std::move(shape);
  t.bytes = checked_bytes(t.shape, type, "tensor '" + name + "'");
  t.name = std::move(name);
  std::unique_ptr<Buffer> buffer;
  {
    std::lock_guard lock(shelf_->mutex);
    if (auto it = shelf_->free.lower_bound(t.bytes); it != shelf_->free.end()) {
      buffer = std::move(it->second);
      shelf_->free.erase(it);
      shelf_->free_bytes -= buffer->capacity;
    }
  }
  if (!buffer) buffer = std::make_unique<Buffer>(t.bytes);  // not zeroed: the caller writes it
  t.data = buffer->memory.get();
  std::weak_ptr<Shelf> home = shelf_;
  t.owner = std::shared_ptr<Buffer>(buffer.release(), [home](Buffer* b) {
    std::unique_ptr<Buffer> back(b);
    const auto shelf = home.lock();
    if (!shelf) return;
    std::lock_guard lock(shelf->mutex);
    if (shelf->free_bytes + back->capacity > shelf->limit_bytes) return;
    shelf->free_bytes += back->capacity;
    const size_t capacity = back->capacity;
    shelf->free.emplace(capacity, std::move(back));
  });
  return t;
}

void HostBufferPool::reserve(size_t bytes, const Pin& pin) {
  if (bytes == 0) return;
  auto buffer = std::make_unique<Buffer>(bytes);
  std::memset(buffer->memory.get(), 0, buffer->capacity);  // the page faults, paid here rather than by a call
  if (pin) {
    try {
      buffer->pin = pin(buffer->memory.get(), buffer->capacity);
    } catch (const std::exception& e) {
      spdlog::debug("a host buffer of {} bytes stays unpinned ({}): its copies go through the driver's staging", bytes, e.what());
    }
  }
  std::lock_guard lock(shelf_->mutex);
  shelf_->limit_bytes = std::max(shelf_->limit_bytes, 2 * (shelf_->free_bytes + buffer->capacity));
  shelf_->free_bytes += buffer->capacity;
  const size_t capacity = buffer->capacity;
  shelf_->free.emplace(capacity, std::move(buffer));
}

size_t HostBufferPool::free_buffers() const {
  std::lock_guard lock(shelf_->mutex);
  return shelf_->free.size();
}

size_t HostBufferPool::free_bytes() const {
  std::lock_guard lock(shelf_->mutex);
  return shelf_->free_bytes;
}

size_t HostBufferPool::free_pinned() const {
  std::lock_guard lock(shelf_->mutex);
  return static_cast<size_t>(std::count_if(shelf_->free.begin(), shelf_->free.end(), [](const auto& b) { return b.second->pin != nullptr; }));
}

}  // namespace ortfleet::detail
