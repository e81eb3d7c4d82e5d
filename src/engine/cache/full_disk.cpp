#include "engine/cache/full_disk.hpp"

#include <sys/statvfs.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace ortfleet::detail {

std::optional<uint64_t> free_bytes(const std::string& folder) {
  struct statvfs fs_info {};
  if (::statvfs(folder.c_str(), &fs_info) != 0) return std::nullopt;
  return static_cast<uint64_t>(fs_info.f_bavail) * fs_info.f_frsize;
}

std::string full_disk_text(const std::string& folder, const std::string& why, const FreeSpaceProbe& probe) {
  const std::optional<uint64_t> free = probe(folder);
  const bool full = (free && *free < kFullBelowBytes) || why.find(std::strerror(ENOSPC)) != std::string::npos ||
                    why.find("disk is full") != std::string::npos;
  if (!full) return {};
  return fmt::format("the disk holding {} is full ({}; {} bytes free there)", folder, std::strerror(ENOSPC), free.value_or(0));
}

}  // namespace ortfleet::detail
