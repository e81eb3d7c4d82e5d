#pragma once
// A read-only memory mapping of a file (RAII). Sessions created from a mapping read the model from
// the page cache without copying it into a private buffer first.
#include <cstddef>
#include <string>

namespace ortfleet::detail {

class MappedFile {
 public:
  /// Maps `path`; with `populate`, pages are faulted in up front (MAP_POPULATE). Throws ortfleet::Error.
  explicit MappedFile(const std::string& path, bool populate = false);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ortfleet::detail
