#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/private_dir.hpp"
#include "base/unique_fd.hpp"
#include "ortfleet/synth/synth.hpp"
#include "engine/cache/cache_use.hpp"
#include "engine/cache/full_disk.hpp"
#include "base/content_hash.hpp"
#include "engine/files/mapped_file.hpp"
#include "engine/cache/model_digest.hpp"
#include "engine/runtime/ort_environment.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/session.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
fs::path fresh(const std::string& name) { return test::fresh_dir(fs::path("cache-tests") / name); }

/// A copy of a model (and of its external data) that a test may damage.
std::string copy_model(const std::string& model, const fs::path& folder) {
  const fs::path to = folder / fs::path(model).filename();
  fs::copy_file(model, to, fs::copy_options::overwrite_existing);
  if (fs::exists(model + ".data")) fs::copy_file(model + ".data", to.string() + ".data", fs::copy_options::overwrite_existing);
  return to.string();
}

struct Started {
  std::vector<float> output;
  bool used_cache = false;
};

/// Starts `model` (with the cache in `cache` unless empty) and runs it once on fixed inputs.
Started start(const std::string& model, const fs::path& cache = {}, ModelCacheFormat format = ModelCacheFormat::onnx) {
  SessionSpec spec;
  spec.model_path = model;
  if (!cache.empty()) {
    spec.cache_dir = cache.string();
    spec.config.session.optimized_model_cache = true;
    spec.config.session.model_cache_fill = ModelCacheFill::inline_start;  // what a background fill does
    spec.config.session.model_cache_format = format;
  }
  Session s(spec);
  // Token ids of the small transformer must index its 100-word vocabulary.
  const auto out = s.run(random_inputs(s.inputs(), 5, 1, {{"input_ids", {0, 99}}}));
  const float* v = out.front().values<float>();
  return {{v, v + out.front().element_count()}, s.used_model_cache()};
}


/// The one published entry in `cache`.
std::string only_entry(const fs::path& cache) {
  const auto entries = ModelCache(cache.string()).entries();
  EXPECT_EQ(entries.size(), 1u);
  return entries.empty() ? std::string() : entries.front().path;
}

std::vector<std::string> names_in(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// Only what a writer may leave: the entry's lock, and the model's remembered digests.
void expect_nothing_but_locks_and_digests(const fs::path& cache) {
  for (const auto& n : names_in(cache)) {
    EXPECT_TRUE(n.ends_with(".lock") || n.ends_with(".digests.json")) << n << " was left behind";
  }
}


void overwrite_in_place(const fs::path& path, const std::string& bytes, std::streamoff at = 0) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(at);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

/// A damage done to a cached entry, and the start after it.
void expect_damage_is_repaired(const std::string& what, const std::function<void(const std::string& entry)>& damage) {
  SCOPED_TRACE(what);
  const fs::path cache = fresh("damage-" + what);
  const std::string model = copy_model(test::small_transformer(), fresh("model-" + what));
  const auto want = start(model).output;
  EXPECT_FALSE(start(model, cache).used_cache);  // the miss that writes the entry
  const std::string entry = only_entry(cache);
  ASSERT_TRUE(start(model, cache).used_cache);
  damage(entry);
  test::CapturedLog log;
  const Started repaired = start(model, cache);  // never an error, never wrong outputs
  test::expect_same_values(want, repaired.output);
  EXPECT_FALSE(repaired.used_cache);
  EXPECT_EQ(log.count("the model cache entry " + entry + " is damaged"), 1u);
  EXPECT_EQ(detail::check_entry(entry, ModelCache(cache.string()).key_text(model, Device::cpu(), {})), "");
  const Started next = start(model, cache);  // the entry was made again
  EXPECT_TRUE(next.used_cache);
  test::expect_same_values(want, next.output);
}
}  // namespace

TEST(ModelCache, EntriesDependOnEverythingThatShapesTheOptimisedGraph) {
  load_runtime();
  const ModelCache cache((test::scratch_dir() / "keys").string());
  const std::string model = test::mlp_model();
  RunConfig base;
  const std::string key = cache.entry_path(model, Device::cpu(), base);
  EXPECT_EQ(cache.entry_path(model, Device::cpu(), base), key);
  EXPECT_EQ(cache.entry_path(model, Device::cpu(1), base), key);  // CPU instances share entries
  RunConfig basic = base;
  basic.session.graph_optimization = GraphOptimization::basic;
  EXPECT_NE(cache.entry_path(model, Device::cpu(), basic), key);
  RunConfig without_fusion = base;  // a graph made with a transformer disabled is not the full graph
  without_fusion.session.config_entries["optimization.disable_specified_optimizers"] = "GeluFusionL2";
  EXPECT_NE(cache.entry_path(model, Device::cpu(), without_fusion), key);
  RunConfig threads = base;
  threads.session.intra_op_threads = 3;  // does not change the graph
  EXPECT_EQ(cache.entry_path(model, Device::cpu(), threads), key);
  EXPECT_NE(cache.entry_path(model, Device::cuda(0), base), key);
  EXPECT_NE(cache.entry_path(test::resnet18_model(), Device::cpu(), base), key);
}

TEST(ModelCache, TheFormatIsPartOfTheKeyAndTheExtension) {
  load_runtime();
  const ModelCache cache((test::scratch_dir() / "keys").string());
  RunConfig ort;
  ort.session.model_cache_format = ModelCacheFormat::ort;
  const std::string onnx_entry = cache.entry_path(test::mlp_model(), Device::cpu(), {});
  const std::string ort_entry = cache.entry_path(test::mlp_model(), Device::cpu(), ort);
  EXPECT_TRUE(onnx_entry.ends_with(".onnx")) << onnx_entry;
  EXPECT_TRUE(ort_entry.ends_with(".ort")) << ort_entry;
  EXPECT_NE(fs::path(onnx_entry).stem(), fs::path(ort_entry).stem());
}

TEST(ModelCache, AutomaticallyNodeHeavyGraphsGetTheOrtFormatAndOthersTheOnnxFormat) {
  load_runtime();
  const ModelCache cache((test::scratch_dir() / "auto-format").string());
  synth::NodeHeavySpec many;
  many.nodes = kOrtFormatMinNodes + 100;
  many.width = 8;
  const std::string node_heavy = synth::write_node_heavy((test::scratch_dir() / "node-heavy.onnx").string(), many).path;
  const RunConfig defaults;
  ASSERT_EQ(defaults.session.model_cache_format, ModelCacheFormat::automatic);
  EXPECT_TRUE(cache.entry_path(node_heavy, Device::cpu(), defaults).ends_with(".ort"));
  EXPECT_TRUE(cache.entry_path(test::mlp_model(), Device::cpu(), defaults).ends_with(".onnx"));
  // Automatic names the same entry as the format it chose: a cache filled either way is found.
  RunConfig onnx;
  onnx.session.model_cache_format = ModelCacheFormat::onnx;
  EXPECT_EQ(cache.entry_path(test::mlp_model(), Device::cpu(), defaults), cache.entry_path(test::mlp_model(), Device::cpu(), onnx));
  RunConfig ort;
  ort.session.model_cache_format = ModelCacheFormat::ort;
  EXPECT_EQ(cache.entry_path(node_heavy, Device::cpu(), defaults), cache.entry_path(node_heavy, Device::cpu(), ort));
  EXPECT_EQ(parse_model_cache_format("auto"), ModelCacheFormat::automatic);
  EXPECT_THROW(parse_model_cache_format("protobuf"), Error);
}

// The ORT format: the miss saves a .ort entry with no side file, the hit loads it and gives the
// uncached model's outputs, for models with weights inline and with external data.
TEST(ModelCache, AnOrtFormatEntryGivesTheUncachedOutputs) {
  load_runtime();
  for (const std::string& source : {test::mlp_model(), test::small_transformer(), test::resnet18_model()}) {
    SCOPED_TRACE(source);
    const fs::path cache = fresh("ort-format-" + fs::path(source).stem().string());
    const std::string model = copy_model(source, fresh("ort-model-" + fs::path(source).stem().string()));
    const auto want = start(model).output;
    const Started miss = start(model, cache, ModelCacheFormat::ort);
    EXPECT_FALSE(miss.used_cache);
    test::expect_same_values(want, miss.output);
    const std::string entry = only_entry(cache);
    EXPECT_TRUE(entry.ends_with(".ort")) << entry;
    EXPECT_FALSE(fs::exists(entry + ".data"));
    const std::string bytes = test::read_all(entry);
    ASSERT_GT(bytes.size(), 8u);
    EXPECT_EQ(bytes.substr(4, 4), "ORTM");  // the FlatBuffer file identifier of ORT-format models
    const Started hit = start(model, cache, ModelCacheFormat::ort);
    EXPECT_TRUE(hit.used_cache);
    test::expect_same_values(want, hit.output);
    EXPECT_EQ(detail::check_entry(entry, ModelCache(cache.string()).key_text(model, Device::cpu(), [] {
                RunConfig c;
                c.session.model_cache_format = ModelCacheFormat::ort;
                return c;
              }())),
              "");
  }
}

TEST(ModelCache, AModifiedModelGetsANewEntry) {
  load_runtime();
  const ModelCache cache((test::scratch_dir() / "keys2").string());
  const auto copy = test::scratch_dir() / "mlp-copy.onnx";
  fs::copy_file(test::mlp_model(), copy, fs::copy_options::overwrite_existing);
  const std::string before = cache.entry_path(copy.string(), Device::cpu(), {});
  std::ofstream(copy, std::ios::app) << ' ';
  EXPECT_NE(cache.entry_path(copy.string(), Device::cpu(), {}), before);
}

// The key is the model's content: a model rewritten in place with the same size, inode and
// modification time (touch -d puts the time back) is a new model, even once its hash is remembered.
TEST(ModelCache, AModelRewrittenInPlaceWithItsOldSizeAndTimesGetsANewEntry) {
  load_runtime();
  const fs::path cache = fresh("rewritten");
  const fs::path folder = fresh("rewritten-models");
  const std::string model = synth::write_mlp((folder / "m.onnx").string(), {}).path;
  synth::WriteOptions seed2;
  seed2.seed = 2;
  const std::string other = synth::write_mlp((folder / "other.onnx").string(), {}, seed2).path;
  ASSERT_EQ(fs::file_size(model), fs::file_size(other));
  ASSERT_NE(test::read_all(model), test::read_all(other));
  // Old enough that its digest is remembered (see FileDigest::settled).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const auto first = start(model, cache);
  EXPECT_FALSE(first.used_cache);
  const auto names = names_in(cache);
  ASSERT_TRUE(std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.ends_with(".digests.json"); }));
  EXPECT_TRUE(start(model, cache).used_cache);
  const auto before = detail::identity_of(model);
  ASSERT_TRUE(before);
  overwrite_in_place(model, test::read_all(other));
  const timespec times[2] = {{0, UTIME_OMIT}, {before->mtime_ns / 1000000000, before->mtime_ns % 1000000000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, model.c_str(), times, 0), 0);
  const auto after = detail::identity_of(model);
  ASSERT_EQ(after->bytes, before->bytes);
  ASSERT_EQ(after->inode, before->inode);
  ASSERT_EQ(after->mtime_ns, before->mtime_ns);
  const Started rewritten = start(model, cache);
  EXPECT_FALSE(rewritten.used_cache);  // not the stale optimised copy of the old model
  test::expect_same_values(start(other).output, rewritten.output);
}

// External weights are part of the model: new weights in the same .data file make a new entry.
TEST(ModelCache, NewExternalWeightsGetANewEntry) {
  load_runtime();
  const fs::path cache = fresh("external");
  const fs::path folder = fresh("external-models");
  const std::string model = test::write_small_transformer(folder / "t.onnx", 1);
  const std::string other = test::write_small_transformer(folder / "u.onnx", 2);
  EXPECT_FALSE(start(model, cache).used_cache);
  EXPECT_TRUE(start(model, cache).used_cache);
  overwrite_in_place(model + ".data", test::read_all(other + ".data"));  // the .onnx file is untouched
  const Started changed = start(model, cache);
  EXPECT_FALSE(changed.used_cache);
  test::expect_same_values(start(other).output, changed.output);
}

TEST(ModelCache, ATruncatedEntryIsRemadeNotAnError) {
  expect_damage_is_repaired("truncated-graph", [](const std::string& entry) { fs::resize_file(entry, fs::file_size(entry) / 2); });
}

TEST(ModelCache, ShortOrMissingWeightsAreRemadeNotAnError) {
  expect_damage_is_repaired("half-data", [](const std::string& entry) {
    fs::resize_file(entry + ".data", fs::file_size(entry + ".data") / 2);
  });
  expect_damage_is_repaired("missing-data", [](const std::string& entry) { fs::remove(entry + ".data"); });
}

TEST(ModelCache, FlippedWeightBytesOfTheSameSizeAreCaught) {
  expect_damage_is_repaired("flipped-data", [](const std::string& entry) {
    const std::string data = entry + ".data";
    const uintmax_t size = fs::file_size(data);
    for (std::streamoff at = 0; at + 4 < static_cast<std::streamoff>(size); at += 256) overwrite_in_place(data, "\x7f\x7f\x7f\x7f", at);
    ASSERT_EQ(fs::file_size(data), size);
  });
}

TEST(ModelCache, AnEntryWithoutAValidManifestIsRemade) {
  expect_damage_is_repaired("no-manifest", [](const std::string& entry) { fs::remove(entry + ".manifest.json"); });
  expect_damage_is_repaired("garbled-manifest", [](const std::string& entry) { std::ofstream(entry + ".manifest.json") << "{\"files\": ["; });
  expect_damage_is_repaired("foreign-manifest", [](const std::string& entry) {
    auto m = nlohmann::json::parse(test::read_all(entry + ".manifest.json"));
    m["key"] = "model=0000000000000000:1";
    std::ofstream(entry + ".manifest.json") << m.dump();
  });
}

// A crash's work-around assigns nodes to the CPU EP by name; an optimised copy lost the assignment
// on a GPU (docs/limits.md), so such a model runs from its own graph: no entry is written or read.
TEST(ModelCache, AModelWhoseNodesAreAssignedByNameRunsWithoutTheCache) {
  const fs::path cache = test::scratch_dir() / "cache-assigned";
  fs::remove_all(cache);
  for (int i = 0; i < 2; ++i) {
    SessionSpec spec;
    spec.model_path = test::mlp_model();
    spec.cache_dir = cache.string();
    spec.config.session.optimized_model_cache = true;
    spec.config.session.model_cache_fill = ModelCacheFill::inline_start;  // what a background fill does
    spec.config.session.config_entries["session.name_based_layer_assignment"] = "cpu(MatMul)";
    Session s(spec);
    s.run(random_inputs(s.inputs(), 5));
    EXPECT_FALSE(s.used_model_cache());
  }
  size_t entries = 0;
  if (fs::exists(cache)) {
    for (const auto& e : fs::recursive_directory_iterator(cache)) entries += e.path().extension() == ".onnx" || e.path().extension() == ".ort";
  }
  EXPECT_EQ(entries, 0u);
  // The same model without the entry is cached as ever.
  EXPECT_FALSE(start(test::mlp_model(), cache).used_cache);
  EXPECT_TRUE(start(test::mlp_model(), cache).used_cache);
}

TEST(ModelCache, AnEntryNeverVerifiedIsRemadeAndEveryNewEntryIsVerified) {
  expect_damage_is_repaired("unverified", [](const std::string& entry) {
    auto m = nlohmann::json::parse(test::read_all(entry + ".manifest.json"));
    ASSERT_EQ(m.at("verified"), true);  // what this build writes, after comparing outputs
    m.erase("verified");                // what an ortfleet without verification wrote
    std::ofstream(entry + ".manifest.json") << m.dump();
  });
}

// The entry is ortfleet's work: one whose manifest vouches for it but that no longer loads is set
// aside, the model starts as it is, and the warning says the model is not at fault.
TEST(ModelCache, AVouchedForEntryThatFailsToLoadIsSetAsideAndNotBlamedOnTheModel) {
  const fs::path cache = fresh("unloadable");
  const std::string model = copy_model(test::small_transformer(), fresh("unloadable-model"));
  const auto want = start(model).output;
  start(model, cache);
  const std::string entry = only_entry(cache);
  test::make_unloadable(entry);
  ASSERT_EQ(detail::check_entry(entry, ModelCache(cache.string()).key_text(model, Device::cpu(), {})), "");

  test::CapturedLog log;
  const Started started = start(model, cache);
  test::expect_same_values(want, started.output);
  EXPECT_FALSE(started.used_cache);
  EXPECT_NE(detail::rejection_of(entry), "");
  EXPECT_FALSE(fs::exists(entry)) << "the rejected entry was left in place";
  bool not_blamed = false;
  for (const auto& line : log.lines()) not_blamed = not_blamed || line.find("Your model is not at fault") != std::string::npos;
  EXPECT_TRUE(not_blamed);
  // Later starts use the model without trying the entry again.
  const Started later = start(model, cache);
  EXPECT_FALSE(later.used_cache);
  test::expect_same_values(want, later.output);
  EXPECT_FALSE(fs::exists(entry));
}

// The manifest covers exactly the bytes published under the entry's name, and nothing of the
// writer is left behind.
TEST(ModelCache, TheManifestCoversExactlyThePublishedFiles) {
  const fs::path cache = fresh("manifest");
  const std::string model = copy_model(test::small_transformer(), fresh("manifest-model"));
  start(model, cache);
  const std::string entry = only_entry(cache);
  const auto manifest = nlohmann::json::parse(test::read_all(entry + ".manifest.json"));
  EXPECT_EQ(manifest.at("key"), ModelCache(cache.string()).key_text(model, Device::cpu(), {}));
  std::vector<std::string> covered;
  for (const auto& f : manifest.at("files")) {
    const fs::path path = fs::path(entry).parent_path() / f.at("name").get<std::string>();
    const std::string bytes = test::read_all(path);
    EXPECT_EQ(f.at("bytes").get<uint64_t>(), bytes.size());
    EXPECT_EQ(f.at("xxh64").get<std::string>(), detail::hex64(detail::xxh64(bytes.data(), bytes.size())));
    covered.push_back(path.filename().string());
  }
  const std::string name = fs::path(entry).filename().string();
  EXPECT_EQ(covered, (std::vector<std::string>{name, name + ".data"}));
  for (const auto& n : names_in(cache)) {
    EXPECT_EQ(n.find(".partial-"), std::string::npos) << n;
  }
}

TEST(ModelCache, FoldersAndFilesArePrivateWhateverTheUmask) {
  const std::string model = copy_model(test::small_transformer(), fresh("umask-model"));
  const fs::path root = test::scratch_dir() / "cache-tests" / "umask";
  fs::remove_all(root);
  {
    const test::OpenUmask umask;
    start(model, root / "models");
  }
  std::vector<std::string> checked;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    struct stat st {};
    ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & (S_IWGRP | S_IWOTH), 0u) << e.path() << " is writable by others";
    if (S_ISDIR(st.st_mode)) {
      EXPECT_EQ(st.st_mode & 07777, 0700u) << e.path();
    }
    checked.push_back(e.path().filename().string());
  }
  EXPECT_GE(checked.size(), 5u);  // models/, the entry, its data, manifest and lock
}

TEST(ModelCache, AFolderAnotherUserControlsIsRefusedWithTheFix) {
  const fs::path cache = fresh("world-writable");
  ::chmod(cache.c_str(), 0777);
  try {
    start(test::mlp_model(), cache);
    FAIL() << "a world-writable cache folder was used";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find(cache.string()), std::string::npos) << text;
    EXPECT_NE(text.find("ORTFLEET_CACHE"), std::string::npos) << text;
  }
  if (::geteuid() != 0) return;  // making a folder of another user needs root
  ::chmod(cache.c_str(), 0700);
  ASSERT_EQ(::chown(cache.c_str(), 65534, 65534), 0);
  EXPECT_THROW(start(test::mlp_model(), cache), Error);
  EXPECT_THROW(ModelCache(cache.string()).entries(), Error);
}

TEST(ModelCache, WithoutAnyCacheLocationItRefusesRatherThanShareOne) {
  const test::ScopedEnv cache("ORTFLEET_CACHE", std::nullopt);
  const test::ScopedEnv home("HOME", std::nullopt);
  {
    const test::ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
    try {
      ModelCache::default_root();
      FAIL() << "a shared folder was chosen: " << ModelCache::default_root();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ORTFLEET_CACHE"), std::string::npos) << e.what();
    }
  }
  const test::ScopedEnv xdg("XDG_CACHE_HOME", "/x");
  EXPECT_EQ(ModelCache::default_root(), "/x/ortfleet");
}

TEST(ModelCache, ACacheFolderThatCannotBeMadeMeansAStartWithoutIt) {
  const fs::path root = fresh("not-a-folder");
  std::ofstream(root / "file") << "in the way";
  const Started s = start(test::mlp_model(), root / "file" / "models");
  EXPECT_FALSE(s.used_cache);
  test::expect_same_values(start(test::mlp_model()).output, s.output);
}

TEST(ModelCache, LockFilesAreNeverFollowedThroughSymlinks) {
  const fs::path root = fresh("lock-symlink");
  std::ofstream(root / "victim") << "precious";
  fs::create_symlink(root / "victim", root / "e.onnx.lock");
  detail::FileLock lock;
  EXPECT_THROW(lock.try_lock((root / "e.onnx.lock").string(), detail::FileLock::Mode::exclusive), detail::FolderNotWritable);
  EXPECT_EQ(test::read_all(root / "victim"), "precious");
}

// docs/guarantees.md, the cache: a symbolic link at an entry's name is never read through (a start
// does not use it, `cache export` does not carry it, what it names is left as it was), and a named pipe
// there is never waited on (export used to map it: open() held until someone wrote to the pipe).
TEST(ModelCache, ALinkOrAPipeAtAnEntrysNameIsNeverReadThroughOrWaitedOn) {
  const fs::path cache = fresh("entry-not-a-file");
  const std::string model = copy_model(test::mlp_model(), fresh("entry-not-a-file-model"));
  EXPECT_FALSE(start(model, cache).used_cache);  // the miss that makes the entry
  const std::string entry = only_entry(cache);
  ASSERT_TRUE(start(model, cache).used_cache);
  const fs::path elsewhere = fresh("entry-not-a-file-elsewhere") / "graph.onnx";
  fs::rename(entry, elsewhere);
  const std::string kept = test::read_all(elsewhere);
  fs::create_symlink(elsewhere, entry);
  const fs::path bundle = cache.parent_path() / "b.ortfleet";
  const auto exported_or_why = [&] {
    std::string said;
    try {
      const auto b = ModelCache(cache.string()).export_bundle({model}, {Device::cpu()}, {}, bundle.string());
      said = b.entries.empty() ? "nothing" : b.entries.front().outcome;
    } catch (const Error& e) {
      said = e.what_failed();
    }
    return said;
  };
  std::string said = exported_or_why();
  EXPECT_NE(said.find(fs::path(entry).filename().string() + " is not a regular file"), std::string::npos) << said;
  EXPECT_EQ(test::read_all(elsewhere), kept) << "what the link names was changed";
  EXPECT_FALSE(start(model, cache).used_cache) << "a start used the entry through the link";
  EXPECT_EQ(test::read_all(elsewhere), kept) << "what the link names was changed";

  fs::remove(entry);
  ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0);
  EXPECT_TRUE(test::finishes_without_waiting_on_pipe(entry, 60, [&] { said = exported_or_why(); })) << "cache export waited on the pipe at " << entry;
  EXPECT_NE(said.find("is not a regular file"), std::string::npos) << said;
  EXPECT_TRUE(fs::is_fifo(entry)) << "export replaced what stands at the entry's name";
  EXPECT_TRUE(test::finishes_without_waiting_on_pipe(entry, 60, [&] { EXPECT_FALSE(start(model, cache).used_cache); }))
      << "a start waited on the pipe at " << entry;
}

TEST(ModelCache, ListsAndClearsEntriesButKeepsThoseInUse) {
  const auto dir = fresh("list");
  const std::string one = "m-0123456789abcdef.onnx";
  const std::string two = "m-fedcba9876543210.onnx";
  std::ofstream(dir / one) << "graph";
  std::ofstream(dir / (one + ".data")) << "weights";
  std::ofstream(dir / two) << "graph";
  std::ofstream(dir / (two + ".partial-12")) << "left by a crash";
  const ModelCache cache(dir.string());
  const auto entries = cache.entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].bytes + entries[1].bytes, 17u);  // graph and weights together
  detail::FileLock reader;
  ASSERT_TRUE(reader.try_lock((dir / (one + ".lock")).string(), detail::FileLock::Mode::shared));
  EXPECT_EQ(cache.clear(), 1u);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{one, one + ".data", one + ".lock"}));
  reader.unlock();
  EXPECT_EQ(cache.clear(), 0u);
  EXPECT_TRUE(cache.entries().empty());
}

// The cache's folder may hold a user's own files (ORTFLEET_CACHE=$HOME makes it ~/models): `cache
// list` does not count them and `cache clear` leaves them, removing only what the cache named.
TEST(ModelCache, ClearLeavesFilesTheCacheDidNotMake) {
  const auto dir = fresh("shared-folder");
  std::ofstream(dir / "resnet50.onnx") << "the user's own model";
  std::ofstream(dir / "bert-base.onnx") << "another";
  std::ofstream(dir / "notes-0123456789abcdef.txt") << "notes";  // a dash and 16 hex digits, but no cache name
  fs::create_directory(dir / "datasets");
  std::ofstream(dir / "datasets" / "inputs.npz") << "arrays";
  std::ofstream(dir / "m-0123456789abcdef.onnx") << "graph";
  std::ofstream(dir / "m-0123456789abcdef.onnx.manifest.json") << "{}";
  const ModelCache cache(dir.string());
  EXPECT_EQ(cache.entries().size(), 1u);
  EXPECT_EQ(cache.clear(), 0u);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"bert-base.onnx", "datasets", "notes-0123456789abcdef.txt", "resnet50.onnx"}));
  EXPECT_EQ(test::read_all(dir / "resnet50.onnx"), "the user's own model");
}

namespace {
/// A CacheUse writing an entry of the small transformer: ONNX Runtime has saved it, unpublished.
struct WrittenEntry {
  const RuntimeInfo& runtime = load_runtime();  // first: the options below need ONNX Runtime's API
  fs::path cache;
  Ort::SessionOptions options;
  std::unique_ptr<detail::CacheUse> use;

  explicit WrittenEntry(const std::string& name) : cache(fresh(name)) {
    const std::string model = copy_model(test::small_transformer(), fresh(name + "-model"));
    RunConfig inline_fill;
    inline_fill.session.model_cache_fill = ModelCacheFill::inline_start;  // the writer's path, as a background fill takes it
    use = std::make_unique<detail::CacheUse>(cache.string(), model, Device::cpu(), inline_fill, options);
    EXPECT_TRUE(use->writing());
    Ort::Session session(detail::ort_env(), model.c_str(), options);
    EXPECT_TRUE(fs::exists(use->entry() + ".partial-" + std::to_string(::getpid())));
    EXPECT_TRUE(fs::exists(use->entry() + ".data"));
  }
};
}  // namespace

// A failed write of the entry (a full disk, a read-only folder, here the manifest's name taken by a
// folder) leaves nothing behind and the session goes on from the model.
TEST(CacheUse, AManifestThatCannotBeWrittenLeavesNothingBehind) {
  WrittenEntry written("manifest-blocked");
  fs::create_directories(written.use->entry() + ".manifest.json/in-the-way");
  EXPECT_FALSE(written.use->commit());
  expect_nothing_but_locks_and_digests(written.cache);
}

TEST(CacheUse, AbandonRemovesEveryFileOfTheEntry) {
  WrittenEntry written("abandon");
  written.use->abandon("the disk is full");
  EXPECT_FALSE(written.use->writing());
  expect_nothing_but_locks_and_digests(written.cache);
  EXPECT_TRUE(fs::exists(written.use->entry() + ".lock"));
}

// A write that failed on a full disk was reported as "was not made (busy)".
TEST(CacheUse, AFullDiskIsSaidAsSuch) {
  WrittenEntry written("disk-full");
  written.use->abandon(std::string("cannot write the entry: ") + std::strerror(ENOSPC));
  EXPECT_STREQ(written.use->outcome(), "unwritable");
  const std::string folder = fs::path(written.use->entry()).parent_path().string();
  EXPECT_NE(written.use->note().find("the disk holding " + folder + " is full (" + std::strerror(ENOSPC) + ";"), std::string::npos)
      << written.use->note();
  EXPECT_NE(detail::write_failure(folder, "a read-only file system").find("writing the entry into " + folder + " failed"), std::string::npos);
}

// On a full disk, ONNX Runtime's own text (a C++ signature, its status prefix, a newline) followed the
// sentence saying so (issue 58's re-audit, U2): it is shortened as ONNX Runtime's errors are.
TEST(CacheUse, AWriteFailureSaysOnlyTheShortCause) {
  const std::string why =
      "/onnxruntime_src/onnxruntime/core/graph/graph.cc:5331 onnx::GraphProto onnxruntime::Graph::ToGraphProtoWithExternalInitializers("
      "const std::filesystem::__cxx11::path&) const [ONNXRuntimeError] : 1 : FAIL : graph.cc:5256 AddExternalInitializersToGraphProtoImpl "
      "Failed to write external initializers to file: \"/c/m.onnx.data\"\n";
  const std::string folder = testing::TempDir();
  EXPECT_EQ(detail::write_failure(folder, why), "writing the entry into " + folder + " failed: Failed to write external initializers to file: \"/c/m.onnx.data\"");
  const std::string ours = std::string("cannot flush x: ") + std::strerror(ENOSPC);
  const std::string full = detail::write_failure(folder, ours);
  EXPECT_EQ(full.rfind("the disk holding " + folder + " is full (", 0), 0u) << full;
  EXPECT_TRUE(full.ends_with(" bytes free there): " + ours)) << full;
}

// The one check of a full disk (full_disk.hpp), which the cache's writes and the diagnostics' reading of
// ONNX Runtime's files share: under 1 MiB free, or the failing call's words.
TEST(FullDisk, IsToldByFreeSpaceOrByWhatTheCallSaid) {
  const auto free = [](uint64_t bytes) { return [bytes](const std::string&) { return std::optional<uint64_t>(bytes); }; };
  const auto unknown = [](const std::string&) { return std::optional<uint64_t>(); };
  EXPECT_EQ(detail::full_disk_text("/d", "", free(4096)), std::string("the disk holding /d is full (") + std::strerror(ENOSPC) + "; 4096 bytes free there)");
  EXPECT_EQ(detail::full_disk_text("/d", "", free(uint64_t{1} << 30)), "");
  EXPECT_EQ(detail::full_disk_text("/d", "", unknown), "");
  EXPECT_NE(detail::full_disk_text("/d", std::string("write: ") + std::strerror(ENOSPC), unknown), "");
  EXPECT_NE(detail::full_disk_text("/d", "cannot write x: the disk is full", free(uint64_t{1} << 30)), "");
  EXPECT_EQ(detail::full_disk_text("/d", "Permission denied", free(uint64_t{1} << 30)), "");
}

namespace {
struct ChildResult {
  int status = -1;
  std::string err;
  std::string out;
};

/// Runs `argv` in a child whose files may not grow past `max_file_bytes` (RLIMIT_FSIZE) with SIGXFSZ
/// ignored, as on a disk that is full: writes past the limit fail with EFBIG.
ChildResult run_with_file_limit(const std::vector<std::string>& argv, const std::string& cache, rlim_t max_file_bytes) {
  std::vector<std::string> env = {"ORTFLEET_CACHE=" + cache};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("ORTFLEET_CACHE=", 0) != 0) env.emplace_back(*e);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
  detail::UniqueFd read_end(pipe_fds[0]);
  detail::UniqueFd write_end(pipe_fds[1]);
  const fs::path out_file = fs::path(cache).parent_path() / ("stdout-" + std::to_string(::getpid()));
  detail::UniqueFd out(::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    ::dup2(out.get(), 1);
    ::dup2(write_end.get(), 2);
    const struct rlimit limit {max_file_bytes, max_file_bytes};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    ::signal(SIGXFSZ, SIG_IGN);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  write_end = detail::UniqueFd();
  ChildResult r;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(read_end.get(), buffer, sizeof(buffer))) > 0) r.err.append(buffer, static_cast<size_t>(n));
  ::waitpid(pid, &r.status, 0);
  r.out = test::read_all(out_file);
  fs::remove(out_file);
  return r;
}
}  // namespace

TEST(ModelCache, AFullDiskMeansAStartWithoutTheCacheAndOneWarning) {
  const fs::path cache = fresh("full-disk");
  const std::string model = copy_model(test::small_transformer(), fresh("full-disk-model"));
  ASSERT_GT(fs::file_size(model + ".data"), 64u * 1024);  // the entry's weights cannot be written
  const ChildResult r = run_with_file_limit(
      {test::bin("ortfleet"), "start", model, "--devices", "cpu*2", "--strategy", "sequential", "--model-cache"},
      cache.string(), 64 * 1024);
  ASSERT_TRUE(WIFEXITED(r.status)) << r.err;
  EXPECT_EQ(WEXITSTATUS(r.status), 0) << r.err;
  size_t warnings = 0;
  for (size_t at = r.err.find("could not be written"); at != std::string::npos; at = r.err.find("could not be written", at + 1)) ++warnings;
  EXPECT_EQ(warnings, 1u) << r.err;
  expect_nothing_but_locks_and_digests(cache / "models");
  // Filled during the start, the outcome says the cache could not be written, never "busy".
  const ChildResult inline_fill = run_with_file_limit({test::bin("ortfleet"), "--json", "start", model, "--devices", "cpu", "--strategy",
                                                       "sequential", "--model-cache", "--model-cache-fill", "inline"},
                                                      cache.string(), 64 * 1024);
  ASSERT_TRUE(WIFEXITED(inline_fill.status)) << inline_fill.err;
  EXPECT_NE(inline_fill.out.find("\"model_cache\": \"unwritable\""), std::string::npos) << inline_fill.out;
  expect_nothing_but_locks_and_digests(cache / "models");
}

}  // namespace ortfleet

namespace ortfleet {
namespace {
SessionSpec cached_spec(const fs::path& cache, ModelCacheFill fill) {
  SessionSpec spec;
  spec.model_path = test::mlp_model();
  spec.cache_dir = cache.string();
  spec.config.session.optimized_model_cache = true;
  spec.config.session.model_cache_fill = fill;
  return spec;
}
}  // namespace

// The start a new user sees first is ONNX Runtime's own: a missing entry is not written on the path
// to ready (a background fill makes it), and the start says so.
TEST(ModelCache, AMissFilledInTheBackgroundWritesNothingOnThePathAndSaysSo) {
  const fs::path cache = test::scratch_dir() / "cache-background";
  fs::remove_all(cache);
  for (int i = 0; i < 2; ++i) {
    Session s(cached_spec(cache, ModelCacheFill::background));
    s.run(random_inputs(s.inputs(), 5));
    EXPECT_EQ(s.model_cache_outcome(), "miss");
    EXPECT_NE(s.model_cache_note().find("after ready, in the background"), std::string::npos) << s.model_cache_note();
    EXPECT_FALSE(s.used_model_cache());
  }
  expect_nothing_but_locks_and_digests(cache);
}

TEST(ModelCache, WithFillOffEntriesAreReadButNeverWritten) {
  const fs::path cache = test::scratch_dir() / "cache-fill-off";
  fs::remove_all(cache);
  { Session off(cached_spec(cache, ModelCacheFill::off)); }
  expect_nothing_but_locks_and_digests(cache);
  { Session writer(cached_spec(cache, ModelCacheFill::inline_start)); }
  Session reader(cached_spec(cache, ModelCacheFill::off));
  EXPECT_TRUE(reader.used_model_cache());
  EXPECT_EQ(reader.model_cache_outcome(), "hit");
}

// An entry priced as loading no faster than the model is not used: a cached start is never slower than
// a plain one. Priced as faster, it is.
TEST(ModelCache, AnEntryPricedAsNoGainIsNotUsedAndAGainfulOneIs) {
  const fs::path cache = test::scratch_dir() / "cache-priced";
  fs::remove_all(cache);
  std::string entry;
  {
    Session writer(cached_spec(cache, ModelCacheFill::inline_start));
    entry = writer.model_cache_entry();
  }
  ASSERT_TRUE(fs::exists(entry));
  detail::record_entry_gain(entry, {/*model_ms=*/10, /*entry_ms=*/10});
  ASSERT_TRUE(detail::gain_of(entry));
  EXPECT_FALSE(detail::gain_of(entry)->pays());
  {
    Session s(cached_spec(cache, ModelCacheFill::background));
    EXPECT_FALSE(s.used_model_cache());
    EXPECT_EQ(s.model_cache_outcome(), "no-gain");
    EXPECT_NE(s.model_cache_note().find("is ready in 10 ms against 10 ms"), std::string::npos) << s.model_cache_note();
  }
  detail::record_entry_gain(entry, {/*model_ms=*/100, /*entry_ms=*/10});
  Session s(cached_spec(cache, ModelCacheFill::background));
  EXPECT_TRUE(s.used_model_cache());
  EXPECT_EQ(s.model_cache_outcome(), "hit");
  const auto listed = ModelCache(cache.string()).entries();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed.front().load_note.substr(0, 11), "is ready in");
}

}  // namespace ortfleet

namespace ortfleet {
namespace {
SessionSpec first_start_spec(const std::string& model, const fs::path& cache) {
  SessionSpec spec;
  spec.model_path = model;
  spec.cache_dir = cache.string();
  spec.config.session.optimized_model_cache = true;
  spec.config.session.model_cache_fill = ModelCacheFill::background;
  return spec;
}
}  // namespace

// A first start hands ONNX Runtime the model's graph with its weights left in the file: the outputs are
// a plain session's, bit for bit, and the timeline says how many bytes stayed where they lie.
TEST(ModelCache, AFirstStartLeavesTheWeightsInTheModelsFileAndGivesThePlainOutputs) {
  const fs::path cache = fresh("first-in-place");
  SessionSpec plain;
  plain.model_path = test::resnet18_model();
  Session reference(plain);
  const auto inputs = random_inputs(reference.inputs(), 3);
  const auto want = reference.run(inputs);
  Timeline timeline;
  Session first(first_start_spec(test::resnet18_model(), cache), &timeline);
  EXPECT_EQ(first.model_cache_outcome(), "miss");
  const auto got = first.run(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const float* w = want[i].values<float>();
    const float* g = got[i].values<float>();
    test::expect_same_values({w, w + want[i].element_count()}, {g, g + got[i].element_count()});
  }
  uint64_t in_place = 0;
  for (const auto& e : timeline.events()) {
    if (e.name == phase::model_read && e.args.count("weights_in_place")) in_place = std::stoull(e.args.at("weights_in_place"));
  }
  EXPECT_GT(in_place, 40u << 20) << "a ResNet-18 holds about 45 MB of weights";
}

// Whether a model has an entry is known from its layout where no entry has it: its weights are not
// read (no key, no entry path, no digest taken). Where an entry of its layout exists (other weights),
// the lookup reads the model to tell them apart, and misses.
TEST(ModelCache, AModelOfALayoutNoEntryHasMissesWithoutItsWeightsRead) {
  load_runtime();
  const fs::path cache = fresh("layout-miss");
  const fs::path models = fresh("layout-miss-models");
  const std::string model = synth::write_mlp((models / "m.onnx").string(), {}).path;
  const std::string other = test::copy_with_other_weights(model, models / "other.onnx");
  RunConfig background;
  background.session.model_cache_fill = ModelCacheFill::background;
  {
    Ort::SessionOptions so;
    detail::CacheUse lookup(cache.string(), model, Device::cpu(), background, so);
    EXPECT_EQ(std::string(lookup.outcome()), "miss");
    EXPECT_EQ(lookup.entry(), "") << "the model's content was hashed to name an entry";
    EXPECT_NE(lookup.note().find("no entry of this model yet"), std::string::npos) << lookup.note();
  }
  EXPECT_TRUE(start(other, cache).output.size() > 0);  // an entry of the same layout, other weights
  {
    Ort::SessionOptions so;
    detail::CacheUse lookup(cache.string(), model, Device::cpu(), background, so);
    EXPECT_EQ(std::string(lookup.outcome()), "miss");
    EXPECT_NE(lookup.entry(), "") << "an entry of its layout exists: the content must tell";
    EXPECT_FALSE(lookup.hit());
  }
}

// An entry an older build wrote records no layout: the next start that hits it by its content records
// the layout, so that the one after finds it without reading the model.
TEST(ModelCache, AnEntryOfAnOlderBuildLearnsItsLayoutWhenItIsHit) {
  const fs::path cache = fresh("older-layout");
  const std::string model = copy_model(test::mlp_model(), fresh("older-layout-model"));
  EXPECT_FALSE(start(model, cache).used_cache);
  const std::string entry = only_entry(cache);
  auto manifest = nlohmann::json::parse(test::read_all(entry + ".manifest.json"));
  const std::string layout = manifest.value("layout_key", "");
  ASSERT_FALSE(layout.empty());
  manifest.erase("layout_key");
  detail::write_private_file(entry + ".manifest.json", manifest.dump(1), false);
  Session hit(first_start_spec(model, cache));
  EXPECT_TRUE(hit.used_model_cache());
  EXPECT_EQ(nlohmann::json::parse(test::read_all(entry + ".manifest.json")).value("layout_key", ""), layout);
}

}  // namespace ortfleet
