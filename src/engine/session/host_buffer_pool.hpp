// Host memory for the outputs that come down from a GPU, recycled between calls.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

/// Host buffers handed out as tensors and taken back when the last copy of a tensor is gone. A fresh
/// buffer of tens of MB pays a page fault per 4 KB page on its first write, and a copy from a GPU into
/// pageable memory goes through the driver's staging buffer: 13.9 ms on average to crop and copy down
/// a DeepLab output of up to 77 MB on an H200, more than the call itself
/// (docs/results/2026-11-26/4xH200-final). Reserved buffers are touched once and may be pinned, so
/// that the copy is one DMA. Tensors may outlive the pool: their memory is then freed with them.
class HostBufferPool {
 public:
  /// Pins `bytes` at a page-aligned `pointer` for a GPU's copies; what it returns keeps the pin (the
  /// pin ends when it goes). Throws when the driver refuses: the buffer is then used unpinned.
  using Pin = std::function<std::shared_ptr<void>(void* pointer, size_t bytes)>;

  HostBufferPool();
  /// A host tensor of `shape` over a kept buffer large enough (the smallest), else a new one.
  /// Uninitialised: the caller writes every byte.
  Tensor allocate(std::string name, ElementType type, std::vector<int64_t> shape);
  /// A buffer of `bytes`, its pages touched now (and pinned with `pin` when given), kept for the calls
  /// to come: what a start that knows its largest outputs pays once, so that no call pays it.
  void reserve(size_t bytes, const Pin& pin = {});
  /// How many buffers are kept free, their bytes, and how many of them are pinned (tests, notes).
  size_t free_buffers() const;
  size_t free_bytes() const;
  size_t free_pinned() const;

 private:
  struct Buffer;
  struct Shelf {
    std::mutex mutex;
    std::multimap<size_t, std::unique_ptr<Buffer>> free;  // by capacity
    size_t free_bytes = 0;
    size_t limit_bytes = 0;  // what the shelf keeps at most; a buffer beyond it is freed
  };
  std::shared_ptr<Shelf> shelf_;
};

}  // namespace ortfleet::detail
