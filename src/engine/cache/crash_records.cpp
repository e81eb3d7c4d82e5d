#include "engine/cache/crash_records.hpp"

#include <filesystem>
#include <fstream>

#include "base/private_dir.hpp"
#include "base/content_hash.hpp"
#include "engine/files/mapped_file.hpp"
#include "ortfleet/engine/cache.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

std::string crash_record_path(const std::string& model, bool make_folder) {
  const auto root = ModelCache::find_default_root();
  std::error_code ec;
  const fs::path absolute = fs::absolute(model, ec);
  const auto id = identity_of(absolute.string());
  if (!root || !id || ec) return {};
  const std::string identity = absolute.string() + "|" + std::to_string(id->inode) + "|" + std::to_string(id->bytes) + "|" +
                               std::to_string(id->mtime_ns) + "|" + std::to_string(id->ctime_ns);
  const fs::path folder = fs::path(*root) / "crashes";
  if (make_folder) {
    try {
      ensure_private_dir(folder, "Set ORTFLEET_CACHE to a folder only you can write");
    } catch (const std::exception&) {
      return {};  // best effort: a crash then goes unremembered
    }
  }
  return (folder / (absolute.stem().string() + "-" + hex64(xxh64(identity.data(), identity.size())) + ".crash")).string();
}

std::optional<std::string> known_crash(const std::string& model) {
  const std::string path = crash_record_path(model, /*make_folder=*/false);
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line.empty()) return std::nullopt;
  return line;
}

}  // namespace ortfleet::detail
