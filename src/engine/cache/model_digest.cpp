#include "engine/cache/model_digest.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/private_dir.hpp"
#include "base/content_hash.hpp"
#include "ortfleet/base/error.hpp"
#include "engine/files/model_file.hpp"
#include "engine/files/model_view.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int64_t kSettledAfterNs = 1'000'000'000;

int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);  // the clock file times are taken from
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// The content hash of `path` (identity `id`): remembered, else read (then `read` holds the digest).
struct Hashed {
  uint64_t xxh64 = 0;
  const json* remembered = nullptr;
  std::optional<FileDigest> read;
};
Hashed hash_of(const DigestMemo& memo, const std::string& path, const FileIdentity& id, Symlinks symlinks = Symlinks::follow) {
  Hashed h;
  const json* record = memo.find(path);
  if (auto known = record ? remembered_hash(*record, id) : std::nullopt) {
    h.xxh64 = *known;
    h.remembered = record;
    return h;
  }
  h.read = digest_file(path, symlinks);
  h.xxh64 = h.read->xxh64;
  return h;
}
}  // namespace

DigestMemo::DigestMemo(const std::string& memo_dir, const fs::path& subject) {
  if (memo_dir.empty()) return;
  file_ = fs::path(memo_dir) / (subject.stem().string() + "-" + hex64(xxh64(subject.string().data(), subject.string().size())) +
                                ".digests.json");
  std::ifstream in(file_);
  if (!in) return;
  try {
    const json j = json::parse(in);
    if (j.is_object() && j.contains("files") && j.at("files").is_object()) files_ = j.at("files");
  } catch (const std::exception& e) {
    spdlog::debug("ignoring the unreadable digest memo {}: {}", file_.string(), e.what());
  }
}

const json* DigestMemo::find(const std::string& path) const {
  const auto it = files_.find(path);
  return it == files_.end() ? nullptr : &*it;
}

void DigestMemo::remember(const std::string& path, const FileDigest& d, json extra) {
  if (file_.empty() || !d.settled) return;
  extra.update(to_record(d));
  files_[path] = std::move(extra);
  dirty_ = true;
}

void DigestMemo::save() const {
  if (!dirty_ || !fs::is_directory(file_.parent_path())) return;
  try {
    write_private_file(file_, json{{"files", files_}}.dump(1), /*durable=*/false);
  } catch (const std::exception& e) {
    spdlog::debug("could not remember digests in {}: {}", file_.string(), e.what());
  }
}

uint64_t DigestMemo::hash(const std::string& path, const FileIdentity& id, Symlinks symlinks) {
  const Hashed h = hash_of(*this, path, id, symlinks);
  if (h.read) remember(path, *h.read);
  return h.xxh64;
}

json to_record(const FileDigest& digest) {
  return json{{"bytes", digest.identity.bytes},
              {"xxh64", hex64(digest.xxh64)},
              {"inode", digest.identity.inode},
              {"mtime_ns", digest.identity.mtime_ns},
              {"ctime_ns", digest.identity.ctime_ns}};
}

std::optional<uint64_t> remembered_hash(const json& record, const FileIdentity& id) {
  try {
    if (record.at("inode").get<uint64_t>() != id.inode || record.at("bytes").get<uint64_t>() != id.bytes ||
        record.at("mtime_ns").get<int64_t>() != id.mtime_ns || record.at("ctime_ns").get<int64_t>() != id.ctime_ns) {
      return std::nullopt;
    }
    const std::string hex = record.at("xxh64").get<std::string>();
    if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) return std::nullopt;
    return std::stoull(hex, nullptr, 16);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

FileDigest digest_file(const std::string& path, Symlinks symlinks) {
  const int64_t started = realtime_ns();
  const MappedFile file(path, /*populate=*/false, symlinks);
  FileDigest d;
  d.identity = file.identity();
  d.xxh64 = xxh64(file.data(), file.size());
  const auto after = identity_of(path, symlinks);
  d.settled = after && *after == d.identity && d.identity.ctime_ns < started - kSettledAfterNs;
  return d;
}

std::map<std::string, uint64_t> external_data_extents(const std::string& path) {
  const fs::path self = fs::absolute(path).lexically_normal();
  std::map<std::string, uint64_t> ends;
  for (const auto& init : initializer_bytes(path)) {
    const fs::path file = fs::path(init.file).lexically_normal();
    if (file == self) continue;  // raw bytes inside the .onnx itself
    // Saturating: the numbers come from the file, and an end past any real size must stay so.
    const uint64_t end = init.bytes > UINT64_MAX - init.offset ? UINT64_MAX : init.offset + init.bytes;
    uint64_t& known = ends[file.string()];
    known = std::max(known, end);
  }
  return ends;
}

bool ModelContent::unchanged() const {
  for (const auto& [path, identity] : files) {
    if (identity_of(path) != identity) return false;
  }
  return true;
}

namespace {
/// The external data files of the model at `absolute` (relative location -> bytes its initializers read),
/// remembered beside its digest or read from its graph.
std::map<std::string, uint64_t> external_files(const fs::path& absolute, const json* remembered) {
  try {
    if (remembered && remembered->contains("external")) return remembered->at("external").get<std::map<std::string, uint64_t>>();
  } catch (const std::exception&) {
  }
  std::map<std::string, uint64_t> external;
  try {
    for (const auto& [file, end] : external_data_extents(absolute.string())) {
      external[fs::path(file).lexically_relative(absolute.parent_path()).string()] = end;
    }
  } catch (const Error& e) {
    // Not a model ONNX Runtime can load either: it will say why. Its bytes still key it.
    spdlog::debug("cannot list the external data of {}: {}", absolute.string(), e.what());
  }
  return external;
}

/// model_content() and remembered_content(): with `read_allowed` false, nullopt as soon as a file's
/// digest is not remembered for its identity.
std::optional<ModelContent> content_of(const std::string& model, const std::string& memo_dir, bool read_allowed) {
  const fs::path absolute = fs::absolute(model).lexically_normal();
  DigestMemo memo(memo_dir, absolute);
  ModelContent content;
  const auto model_id = identity_of(absolute.string());
  if (!model_id) throw Error("cannot stat model " + model, "Check the path");
  auto hashed = [&](const std::string& path, const FileIdentity& id) -> std::optional<Hashed> {
    const json* record = memo.find(path);
    if (!read_allowed && !(record && remembered_hash(*record, id))) return std::nullopt;
    return hash_of(memo, path, id);
  };
  const auto model_hash = hashed(absolute.string(), *model_id);
  if (!model_hash) return std::nullopt;
  const auto external = external_files(absolute, model_hash->remembered);
  if (model_hash->read) memo.remember(absolute.string(), *model_hash->read, json{{"external", external}});
  content.text = "model=" + hex64(model_hash->xxh64) + ":" + std::to_string(model_id->bytes);
  content.files.emplace_back(absolute.string(), *model_id);

  // The weights of a model with external data live in other files: a changed weight must change the key.
  for (const auto& entry : external) {
    const std::string& location = entry.first;
    const std::string path = (absolute.parent_path() / location).lexically_normal().string();
    content.text += "|data:" + location + "=";
    const auto id = identity_of(path);
    if (!id || !id->regular) {
      content.text += "missing";  // ONNX Runtime will say so when it loads the model
      continue;
    }
    const auto data_hash = hashed(path, *id);
    if (!data_hash) return std::nullopt;
    if (data_hash->read) memo.remember(path, *data_hash->read);
    content.text += hex64(data_hash->xxh64) + ":" + std::to_string(id->bytes);
    content.files.emplace_back(path, *id);
  }
  memo.save();
  return content;
}
}  // namespace

ModelContent model_content(const std::string& model, const std::string& memo_dir) { return *content_of(model, memo_dir, true); }

std::optional<ModelContent> remembered_content(const std::string& model, const std::string& memo_dir) {
  return content_of(model, memo_dir, false);
}

std::string model_layout(const std::string& model) {
  const MappedFile mapped(fs::absolute(model).lexically_normal().string());
  return model_layout(model, view_of(model, mapped.data(), mapped.size()).layout);
}

std::string model_layout(const std::string& model, uint64_t onnx_layout) {
  const fs::path absolute = fs::absolute(model).lexically_normal();
  std::string text = "layout=" + hex64(onnx_layout);
  // An external data file's weights are not read: its size stands for them, as a weight's length does.
  for (const auto& [location, end] : external_files(absolute, nullptr)) {
    const auto id = identity_of((absolute.parent_path() / location).lexically_normal().string());
    text += "|data:" + location + ":" + (id && id->regular ? std::to_string(id->bytes) : std::string("missing"));
  }
  return text;
}

}  // namespace ortfleet::detail
