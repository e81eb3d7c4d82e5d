#pragma once
// One session's use of the optimised-model cache (ortfleet/engine/cache.hpp): a hit it loads with
// graph optimisation off, or a miss it fills by having ONNX Runtime save its optimised graph.
//
// An entry ENTRY (<model stem>-<key hash>.onnx, or .ort in ONNX Runtime's ORT format) is the files
// ONNX Runtime writes, ENTRY and ENTRY.data (its weights; none in the ORT format), and ENTRY.manifest.json: their sizes and content hashes and the key,
// written after ONNX Runtime saved them and before ENTRY appears under its name. Readers hold
// ENTRY.lock shared while they check and load the entry; its one writer holds it exclusive, so
// nobody reads an entry while it is made, set aside or rebuilt. Others starting meanwhile run
// without the cache ("busy"). Every failure to write (full disk, read-only folder) means a start
// without the cache and one warning per process, never a failed start.
//
// An entry is what ortfleet wrote, not the user's model, so it is used only once verified: before it
// is published, a session loads it and its outputs are compared with the model's on the warm-up
// inputs (Session does this; the manifest records "verified"). An entry that fails is never
// published: ENTRY.rejected.json keeps the reason, and later starts of that model and configuration
// load the model itself without trying again. An entry that loaded once but fails to load later is
// set aside the same way, and the start goes on from the model.
#include <memory>
#include <optional>
#include <optional>
#include <filesystem>
#include <vector>
#include <string>

#include "base/termination_cleanup.hpp"
#include "engine/cache/file_lock.hpp"
#include "engine/cache/model_digest.hpp"
#include "engine/runtime/ort_api.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

inline constexpr const char* kCacheFolderHint =
    "Set ORTFLEET_CACHE to a folder only you can write (ortfleet makes it with mode 0700)";

/// The key of an entry: the model's content (model_content().text) and what shapes its optimised graph.
std::string cache_key_text(const std::string& model_content, const Device& device, const RunConfig& config);

/// The format an entry of `model` gets: `asked`, or for automatic the one that wins for its class
/// (the ORT format for kOrtFormatMinNodes nodes or more, else ONNX).
ModelCacheFormat resolve_model_cache_format(const std::string& model, ModelCacheFormat asked);

/// Whether the file `name` is one of the entry named `entry`'s (ENTRY, ENTRY.data,
/// ENTRY.manifest.json, ENTRY.lock, and what a writer leaves behind: ENTRY.partial-<pid>, ...).
bool belongs_to_entry(const std::string& name, const std::string& entry);

/// Removes every file of `entry` but its lock (which the caller holds exclusive): a damaged entry,
/// what a crashed writer left, or an entry this process could not finish. Throws FolderNotWritable.
void remove_entry_files(const std::string& entry);
/// Puts the folder's names (renames into it) on disk; best effort.
void sync_folder(const std::string& folder);

/// The version of ENTRY.manifest.json this build writes and reads.
inline constexpr int kEntryManifestVersion = 1;

/// The class of device an entry is made for, as its key names it: "cpu-<hash of this CPU's model and
/// instruction-set flags>" (an optimised CPU graph uses the ISA it was made on), or "cuda-sm_90" (the
/// GPU's compute capability).
std::string device_class(const Device& device);

/// The file name of the entry of `model_path` for `key` in `format`: <model stem>-<xxh64 of key>.onnx, or .ort.
std::string entry_name(const std::string& model_path, const std::string& key, ModelCacheFormat format);

/// What names a model's entry in any cache folder.
struct EntryKey {
  ModelContent content;
  ModelCacheFormat format = ModelCacheFormat::onnx;  ///< resolved: onnx or ort
  std::string key;   ///< cache_key_text()
  std::string name;  ///< <model stem>-<xxh64 of key>.onnx, or .ort
};
/// The key of `model`'s entry for `device` and `config` (the format resolved as a start resolves it).
/// `memo_dir`: where the model's digests are remembered (a private folder; "" for none).
EntryKey entry_key(const std::string& model, const Device& device, const RunConfig& config, const std::string& memo_dir);

/// The entry named `name` in `dir`, else one of the same key under another model file's name
/// (<other stem>-<same key hash>.<same extension>: the model was renamed since, or the entry came from
/// a bundle or another machine's cache); nullopt when `dir` holds neither.
/// The model's layout (model_layout()) keyed as cache_key_text() keys its content: every entry made from
/// a model with this layout, device class and configuration records it in its manifest ("layout_key").
std::string layout_key(const std::string& model, const std::string& layout, const Device& device, const RunConfig& config);

/// Whether any entry in the model folder `dir` may have been made from a model of this layout key: one
/// whose manifest records it, or an entry of an older build (which records none) that names `model`, or
/// with `older_ones_may_be`, any such entry (a layer no start can teach the layout: the shared one).
bool any_entry_of_layout(const std::string& dir, const std::string& layout_key, const std::string& model, bool older_ones_may_be);
/// Whether looking `model` up must know its content (read every weight to hash it): the start writes its
/// entry inline, or an entry of its layout (`layout_key`) is in the cache folder `cache_dir` or the shared
/// layer. The session's lookup and the start's prefetch of the key decide by this one test.
bool lookup_needs_content(const std::string& model, const std::string& layout_key, const std::string& cache_dir, const RunConfig& config);
/// Every entry's ENTRY.manifest.json in the cache folder `dir` (none where it cannot be read).
std::vector<std::filesystem::path> entry_manifests(const std::filesystem::path& dir);

std::optional<std::string> find_entry(const std::string& dir, const std::string& name);

/// How check_entry treats an entry.
struct EntryCheck {
  /// The entry is in a layer this process must never write (the shared cache layer): its manifest is
  /// never rewritten, and the hashes of files whose identity differs from the manifest's are
  /// remembered in `memo_dir` instead (the local cache's folder; "" hashes them at every check).
  bool read_only = false;
  std::string memo_dir;
};

/// Why the entry at `entry` (ENTRY, with its data and manifest beside it) cannot be used for `key`:
/// empty when it can. Files whose identity changed since the manifest was written are hashed
/// again; when they still match, the manifest is brought up to date (best effort), unless read-only.
std::string check_entry(const std::string& entry, const std::string& key, const EntryCheck& how = {});

class CacheUse {
 public:
  /// Not using the cache: the model is loaded as it is.
  explicit CacheUse(std::string model) : model_(model), source_(std::move(model)) {}
  /// Looks the entry up in `cache_dir` and sets `options` for a hit (optimisation off) or, when the
  /// config fills the cache inline, a miss this process fills (where to save the optimised graph and
  /// its weights). A miss that is filled in the background, or never, loads the model as it is. An
  /// entry priced as loading no faster than the model is not used ("no-gain"). Throws
  /// ortfleet::Error when the cache folder is unsafe (another user owns it or can write it).
  /// `layout`: model_layout() of the model, when the caller has it (a model whose layout no entry has
  /// then misses without a byte of its weights read).
  CacheUse(const std::string& cache_dir, const std::string& model, const Device& device, const RunConfig& config,
           Ort::SessionOptions& options, const std::string& layout = {});
  ~CacheUse();  ///< abandons an entry that was not committed
  CacheUse(const CacheUse&) = delete;
  CacheUse& operator=(const CacheUse&) = delete;

  /// What the session loads: the cached entry on a hit, else the model.
  const std::string& source() const { return source_; }
  bool hit() const { return hit_; }
  /// Whether the entry is the shared layer's (ModelCache::shared_root): read, never written beside
  /// (no shape costs, no rejection record).
  bool read_only() const { return shared_; }
  /// Whether this session writes a new entry.
  bool writing() const { return !partial_.empty(); }
  /// "hit" (note() says when from the shared layer), "miss" (no entry yet: this session writes it when filling inline, else it is made in
  /// the background or not at all), "busy" (another process writes it, or loads it), "unwritable"
  /// (the cache folder cannot be written), "rejected" (an entry of this model and configuration
  /// failed its verification: the model is used), "no-gain" (its entry loads no faster than the
  /// model, as priced when it was made: the model is used) or "off".
  const char* outcome() const;
  /// Why the outcome is what it is, for a person ("is ready in 48 ms against 51 ms from the model"); "" when nothing to say.
  const std::string& note() const { return note_; }

  /// The entry's path (whether or not it exists).
  const std::string& entry() const { return entry_; }
  /// What this session is writing: the unpublished entry a verifier loads ("" when not writing).
  const std::string& written() const { return partial_; }
  /// Sets `options` to load an entry: graph optimisation off (its graph is final), and for the ORT
  /// format, read in place from a mapping.
  void use_entry_options(Ort::SessionOptions& options) const;
  /// The session exists and the entry was verified: seal it (manifest) and publish it (atomic rename:
  /// readers see a whole entry or none). True when this session wrote an entry that is now in place;
  /// on failure the entry's files are removed and the start goes on without it.
  bool commit();
  /// The entry failed its verification, or (on a hit) could not be loaded: remove it and record
  /// `why` in ENTRY.rejected.json, so later starts use the model without trying the entry again.
  /// Best effort; warns once with the reason, saying it is the cache's fault, not the model's.
  void reject(const std::string& why);
  /// Removes every file of an entry this session was writing. With `why` (creating the session
  /// failed while it wrote the entry), warns once per process that the cache could not be written.
  void abandon(const std::string& why = {});

 private:
  void seal();
  /// Looks the entry up in the shared layer, if there is one: true when it decided the outcome (a hit,
  /// or an entry priced as no gain); false to go on with the local cache (none there, or a damaged one,
  /// which is warned about and left as it is). `memo_dir`: the local cache's folder, or "".
  bool use_shared_layer(const RunConfig& config, const std::string& name, const std::string& memo_dir, Ort::SessionOptions& options);
  /// Loads from entry_, checked by the caller: true (a hit), or false when its recorded gain says it
  /// saves nothing, and the model is loaded as it is (`which` names the entry in the note).
  bool use_checked_entry(const std::string& which, Ort::SessionOptions& options);
  /// Records layout_key_ in the manifest of entry_ where it lacks it; false when entry_ cannot be read
  /// any more afterwards (another process is writing it), with no lock held.
  bool record_layout_key();

  std::string model_;
  std::string source_;
  std::string entry_;
  std::string key_;
  std::string layout_key_;  ///< layout_key() of the model, recorded in the manifest of the entry this session writes
  std::string partial_;
  ModelContent content_;
  ModelCacheFormat format_ = ModelCacheFormat::onnx;
  FileLock lock_;
  bool hit_ = false;
  bool enabled_ = false;
  bool unwritable_ = false;
  bool rejected_ = false;
  bool no_gain_ = false;
  bool shared_ = false;
  std::string note_;
  /// While an entry is written: its files, removed if this process is told to stop (a background
  /// fill whose job ended), so that no unfinished entry stays behind.
  std::unique_ptr<RemoveOnTermination> unfinished_;
};

/// What an entry saves a start, measured after it was made: a session created from the entry and its
/// first run against the same from the model, on this machine. The first run counts: a session from
/// an entry (its weights uploaded before it) ran its first call 55 ms slower than one from the model
/// on an H200 (EfficientNet-B4 and a transformer alike, docs/results/2026-11-26/4xH200-after), which
/// can eat what the entry saves at creation. It pays when ready in under kEntryPaysBelow of the model's time.
struct EntryGain {
  double model_ms = 0;
  double entry_ms = 0;
  static constexpr double kEntryPaysBelow = 0.95;
  bool pays() const { return entry_ms < kEntryPaysBelow * model_ms; }
  std::string text() const;  ///< "is ready in 48 ms against 510 ms from the model (saves 462 ms)"
};
/// Records `gain` in the manifest of the verified entry `entry` (best effort: an entry without one is used).
void record_entry_gain(const std::string& entry, const EntryGain& gain);
/// The gain recorded for `entry`, if it was priced.
std::optional<EntryGain> gain_of(const std::string& entry);
/// Why an entry could not be written into `folder` (`why`: what the failing call said), in words: a
/// full disk is said as such ("the disk holding FOLDER is full (No space left on device; N bytes free
/// there): ..."), whatever words the call used (ONNX Runtime's differ from ours: full_disk.hpp), and
/// what the call said in one short line (ONNX Runtime's text shortened as its errors are: ort_errors.hpp).
std::string write_failure(const std::string& folder, const std::string& why);

/// A text field of the entry's manifest ("model": the model it was made from; "key"), "" when it has none.
std::string manifest_text_of(const std::string& entry, const char* field);

inline constexpr const char* kSharedLayerHint =
    "Let only the layer's owner write its folders and files (chmod go-w; a folder above it may be writable by others only when "
    "sticky, as /tmp), or unset ORTFLEET_CACHE_SHARED";
/// Why the shared layer `root` must not be used at all ("" when it may): its models folder, a folder
/// above it or a symlink on the way is one another user could change (check_shared_dir).
std::string shared_layer_refusal(const std::string& root);
/// Why the entry `entry` of the shared layer `root` must not be used ("" when it may): the layer's
/// refusal, or one of the entry's files another user owns or can write.
std::string shared_entry_refusal(const std::string& root, const std::string& entry);

/// Removes the staging folders that imports into `dir` killed before their end left there: this host's
/// only, whose process is gone (engine/cache/bundle_import.cpp).
void sweep_import_staging(const std::string& dir);

/// The reason recorded for the rejected entry `entry` (in ENTRY.rejected.json), or "" when it has none.
std::string rejection_of(const std::string& entry);

}  // namespace ortfleet::detail
