#pragma once
// What the model cache knows of a file's content: a content hash (XXH64) with the file's identity
// when it was read. The cache keys its entries by the model's content (the .onnx file and every
// external data file it names), and seals each entry with the digests of the files it wrote.
//
// Hashing runs at memory speed but a large model still costs a noticeable share of a start, so a
// digest is remembered with the file's identity and used again while the identity is unchanged: the
// kernel sets the change time on every write and no user can set it back (FileIdentity).
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/files/mapped_file.hpp"

namespace ortfleet::detail {

struct FileDigest {
  FileIdentity identity;
  uint64_t xxh64 = 0;
  /// The file did not change while it was read and had last changed over a second before: its
  /// identity may stand for this content later. (File times have a granularity of a few
  /// milliseconds; a write within the same tick as the last one leaves the change time as it was.)
  bool settled = false;
};

/// Reads and hashes `path`. Throws ortfleet::Error when it cannot be read.
FileDigest digest_file(const std::string& path, Symlinks symlinks);

/// A digest as a record: {"bytes", "xxh64", "inode", "mtime_ns", "ctime_ns"}.
nlohmann::json to_record(const FileDigest& digest);
/// The content hash a record holds, while the file it was taken of still has identity `id`; nullopt
/// when the identity changed (the file must be read again) or the record is damaged.
std::optional<uint64_t> remembered_hash(const nlohmann::json& record, const FileIdentity& id);

/// Content hashes remembered in a private folder (`memo_dir`, the local model cache's) for one subject
/// (a model, a read-only entry): <memo_dir>/<stem>-<hash of its path>.digests.json, each file's hash
/// with the identity it had when read. An empty `memo_dir` remembers nothing.
class DigestMemo {
 public:
  DigestMemo(const std::string& memo_dir, const std::filesystem::path& subject);
  /// The content hash of `path` (identity `id`): remembered for that identity, else read (and then
  /// remembered, when settled, once save() runs). Throws ortfleet::Error when it cannot be read.
  uint64_t hash(const std::string& path, const FileIdentity& id, Symlinks symlinks);
  /// The remembered record of `path`, whatever its identity then.
  const nlohmann::json* find(const std::string& path) const;
  void remember(const std::string& path, const FileDigest& digest, nlohmann::json extra = nlohmann::json::object());
  /// Best effort: without it the next reader hashes again.
  void save() const;

 private:
  std::filesystem::path file_;
  nlohmann::json files_ = nlohmann::json::object();
  bool dirty_ = false;
};

/// The model's content as the cache key names it.
struct ModelContent {
  std::string text;  ///< "model=<xxh64>:<bytes>" and "|data:<location>=<xxh64>:<bytes>" per external file
  std::vector<std::pair<std::string, FileIdentity>> files;  ///< each file read, as it was
  /// Whether every file still has the identity it had when its content was taken (nothing wrote to
  /// it since, e.g. while ONNX Runtime read it to make a cache entry).
  bool unchanged() const;
};

/// The external data files of the model at `path` (absolute, normalised) -> the bytes its
/// initializers read from each (the largest offset + length). Throws ortfleet::Error for a malformed model.
std::map<std::string, uint64_t> external_data_extents(const std::string& path);

/// `memo_dir`: where digests are remembered (a private folder: the model cache's); empty for none.
ModelContent model_content(const std::string& model, const std::string& memo_dir);

/// The model's content as model_content() would name it, where every file's digest is remembered for
/// the identity it has now: nothing is read but the memo. nullopt when any file would have to be read.
std::optional<ModelContent> remembered_content(const std::string& model, const std::string& memo_dir);

/// What the model's structure is, read without a single weight: its layout (engine/files/model_view.hpp)
/// and the size of each external data file, as text ("layout=<xxh64>" and "|data:<location>:<bytes>").
/// Two models with the same content have the same layout text; two with different layout texts cannot
/// be the same. Throws ortfleet::Error for a file that is no model.
std::string model_layout(const std::string& model);
/// The same, from the layout of the .onnx itself (ModelView::layout), already read.
std::string model_layout(const std::string& model, uint64_t onnx_layout);

}  // namespace ortfleet::detail
