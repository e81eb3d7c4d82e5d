// Cache bundles (ModelCache::export_bundle, import_bundle) and the read-only shared layer of the cache.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "base/unique_fd.hpp"
#include "engine/cache/cache_use.hpp"
#include "base/content_hash.hpp"
#include "engine/cache/file_lock.hpp"
#include "engine/cache/model_digest.hpp"
#include "engine/cache/tar_archive.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/session.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path fresh_bundle_dir(const std::string& name) { return test::fresh_dir(fs::path("bundle-tests") / name); }

struct BundleStart {
  std::vector<float> output;
  std::string outcome;
  std::string note;
};

/// Starts `model` with the cache in `cache` (filled inline when it misses) and `shared` as the shared
/// layer (none when empty), and runs it once on fixed inputs. Without `cache`: no cache at all.
BundleStart start_with_bundle_cache(const std::string& model, const fs::path& cache = {}, const fs::path& shared = {}) {
  SessionSpec spec;
  spec.model_path = model;
  if (!cache.empty()) {
    spec.cache_dir = cache.string();
    spec.config.session.optimized_model_cache = true;
    spec.config.session.model_cache_fill = ModelCacheFill::inline_start;
    spec.config.session.model_cache_shared = shared.string();
  }
  Session s(spec);
  const auto out = s.run(random_inputs(s.inputs(), 5, 1, {{"input_ids", {0, 99}}}));
  const float* v = out.front().values<float>();
  return {{v, v + out.front().element_count()}, s.model_cache_outcome(), s.model_cache_note()};
}


/// Every file under `folder` with its bytes, mode and change time: what "left as it was" compares.
std::map<std::string, std::string> snapshot(const fs::path& folder) {
  std::map<std::string, std::string> files;
  if (!fs::exists(folder)) return files;
  for (const auto& e : fs::recursive_directory_iterator(folder)) {
    struct stat st {};
    ::lstat(e.path().c_str(), &st);
    // A folder's own times change when an import stages files in it and removes them: only files' are kept.
    const bool file = S_ISREG(st.st_mode);
    files[fs::relative(e.path(), folder).string()] =
        std::to_string(st.st_mode) + "|" + (file ? std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec) : "") + "|" +
        (file ? test::read_all(e.path()) : std::string());
  }
  return files;
}

/// An entry made in `cache` for `model` and exported alone to `bundle`.
void make_bundle(const std::string& model, const fs::path& cache, const fs::path& bundle) {
  start_with_bundle_cache(model, cache);
  const CacheBundle b = ModelCache((cache).string()).export_bundle({model}, {Device::cpu()}, {}, bundle.string());
  ASSERT_EQ(b.entries.size(), 1u);
  ASSERT_EQ(b.entries.front().outcome, "exported");
}

/// `model`'s entry made in DIR/a, exported to DIR/b.ortfleet and imported into the shared layer
/// DIR/shared: its path there.
std::string shared_entry(const std::string& model, const fs::path& dir) {
  make_bundle(model, dir / "a", dir / "b.ortfleet");
  ModelCache((dir / "shared" / "models").string()).import_bundle((dir / "b.ortfleet").string(), /*shared_layer=*/true);
  return ModelCache((dir / "shared" / "models").string()).entries(/*private_folder=*/false).front().path;
}

/// One member of a bundle, as read back for forging.
struct Member {
  std::string name;
  std::string bytes;
  char type = '0';
  std::string link;
};

std::vector<Member> members_of(const fs::path& bundle) {
  const detail::UniqueFd fd(::open(bundle.c_str(), O_RDONLY | O_CLOEXEC));
  detail::TarReader tar(fd.get(), bundle.string());
  std::vector<Member> out;
  while (const auto m = tar.next()) out.push_back({m->name, tar.read_small(uint64_t{1} << 30), m->type, m->link});
  return out;
}

void write_members(const fs::path& bundle, const std::vector<Member>& members) {
  const detail::UniqueFd fd(::open(bundle.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  detail::TarWriter tar(fd.get(), bundle.string());
  for (const auto& m : members) tar.add(m.name, m.bytes.data(), m.bytes.size(), 0, m.type, m.link);
  tar.finish();
}

/// Rewrites `bundle` into `out` after `edit` changed its manifest or members; with `fix_sums`, the
/// manifest's member list is made to match the members again (sizes and checksums), so that only the
/// edit is wrong.
void forge(const fs::path& bundle, const fs::path& out, const std::function<void(json& manifest, std::vector<Member>& members)>& edit,
           bool fix_sums = true) {
  auto members = members_of(bundle);
  json manifest = json::parse(members.front().bytes);
  members.erase(members.begin());
  edit(manifest, members);
  if (fix_sums) {
    for (auto& listed : manifest.at("members")) {
      for (const auto& m : members) {
        if (m.name != listed.at("name")) continue;
        listed["bytes"] = m.bytes.size();
        listed["xxh64"] = detail::hex64(detail::xxh64(m.bytes.data(), m.bytes.size()));
      }
    }
  }
  members.insert(members.begin(), Member{"ortfleet-bundle.json", manifest.dump(), '0', {}});
  write_members(out, members);
}

/// Importing `bundle` into `cache` is refused with one line holding `why`, and leaves the cache as it was.
void expect_refused(const fs::path& bundle, const fs::path& cache, const std::string& why) {
  SCOPED_TRACE(bundle.filename().string() + ": " + why);
  const auto before = snapshot(cache);
  const Error e = test::error_from([&] { ModelCache((cache / "models").string()).import_bundle(bundle.string()); });
  EXPECT_EQ(e.what_failed().rfind("refused the bundle " + bundle.string() + ": ", 0), 0u) << e.what_failed();
  EXPECT_NE(e.what_failed().find(why), std::string::npos) << e.what_failed();
  EXPECT_EQ(e.what_failed().find('\n'), std::string::npos) << "not one line: " << e.what_failed();
  EXPECT_EQ(e.what_failed().find("json.exception"), std::string::npos) << "the JSON library's name: " << e.what_failed();
  EXPECT_FALSE(e.hint().empty());
  EXPECT_EQ(snapshot(cache), before) << "the cache changed";
}

/// A copy of the small transformer (its weights in DIR/model.onnx.data), for tests that write around it.
std::string write_small_transformer_copy(const fs::path& dir) { return test::write_small_transformer(dir / "model.onnx", 7); }

/// A cache that holds one entry already (of another model): what every refused import must leave alone.
fs::path lived_in_cache(const std::string& name) {
  const fs::path cache = fresh_bundle_dir(name);
  start_with_bundle_cache(test::mlp_model(), cache / "models");
  return cache;
}


}  // namespace

TEST(TarArchive, WhatItWritesItReadsBackAndGnuTarListsIt) {
  const fs::path dir = fresh_bundle_dir("tar");
  const std::string long_folder(120, 'f');
  write_members(dir / "a.tar", {{"first.json", "{}", '0', {}}, {long_folder + "/second.bin", std::string(1000, 'x'), '0', {}}, {"empty", "", '0', {}}});
  const auto back = members_of(dir / "a.tar");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[1].name, long_folder + "/second.bin");
  EXPECT_EQ(back[1].bytes, std::string(1000, 'x'));
  EXPECT_EQ(back[2].bytes, "");
  EXPECT_EQ(std::system(("tar tf " + (dir / "a.tar").string() + " >/dev/null").c_str()), 0) << "GNU tar cannot list it";
}

TEST(TarArchive, ADamagedOrTruncatedArchiveIsAnErrorNeverAShortRead) {
  const fs::path dir = fresh_bundle_dir("tar-damage");
  write_members(dir / "a.tar", {{"one", std::string(3000, 'a'), '0', {}}, {"two", "bb", '0', {}}});
  const std::string whole = test::read_all(dir / "a.tar");
  const auto read_all_members = [&](const std::string& bytes) {
    std::ofstream(dir / "b.tar", std::ios::binary | std::ios::trunc) << bytes;
    members_of(dir / "b.tar");
  };
  for (const size_t cut : {size_t{100}, size_t{512}, size_t{2000}, size_t{3584 + 10}, whole.size() - 1024}) {
    SCOPED_TRACE(cut);
    EXPECT_NE(test::error_from([&] { read_all_members(whole.substr(0, cut)); }).what_failed().find("truncated"), std::string::npos);
  }
  std::string flipped = whole;
  flipped[10] = 'Z';  // inside the first header's name
  EXPECT_NE(test::error_from([&] { read_all_members(flipped); }).what_failed().find("fails its checksum"), std::string::npos);
  EXPECT_NE(test::error_from([&] { read_all_members(whole + "trailing junk"); }).what_failed().find("bytes after the end"), std::string::npos);
}

TEST(CacheBundle, AnExportedEntryImportedIntoAFreshCacheIsAHitOnTheFirstStart) {
  const fs::path dir = fresh_bundle_dir("round-trip");
  const std::string model = test::small_transformer();
  const auto want = start_with_bundle_cache(model).output;
  make_bundle(model, dir / "a", dir / "models.ortfleet");
  const CacheBundle imported = ModelCache((dir / "b").string()).import_bundle((dir / "models.ortfleet").string());
  ASSERT_EQ(imported.entries.size(), 1u);
  EXPECT_EQ(imported.entries.front().outcome, "added");
  EXPECT_EQ(imported.onnxruntime_version, load_runtime().version);
  const BundleStart first = start_with_bundle_cache(model, dir / "b");
  EXPECT_EQ(first.outcome, "hit");
  test::expect_same_values(want, first.output);
  // Files as a start makes them: private, nothing of the import left behind.
  for (const auto& e : fs::directory_iterator(dir / "b")) {
    EXPECT_EQ(e.path().filename().string().find(".import-"), std::string::npos) << e.path();
    EXPECT_EQ(fs::status(e.path()).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none) << e.path();
  }
  // Again: kept, not rewritten.
  const auto before = snapshot(dir / "b");
  EXPECT_EQ(ModelCache((dir / "b").string()).import_bundle((dir / "models.ortfleet").string()).entries.front().outcome, "already here");
  EXPECT_EQ(snapshot(dir / "b"), before);
}

TEST(CacheBundle, TheEntryIsFoundUnderAnotherModelFileName) {
  const fs::path dir = fresh_bundle_dir("renamed");
  make_bundle(test::mlp_model(), dir / "a", dir / "b.ortfleet");
  ModelCache((dir / "b").string()).import_bundle((dir / "b.ortfleet").string());
  fs::copy_file(test::mlp_model(), dir / "renamed.onnx");
  EXPECT_EQ(start_with_bundle_cache((dir / "renamed.onnx").string(), dir / "b").outcome, "hit");
}

TEST(CacheBundle, AModelWithALongFileNameIsExportedAndImported) {
  const fs::path dir = fresh_bundle_dir("long-name");
  const fs::path model = dir / (std::string(90, 'm') + ".onnx");
  fs::copy_file(test::mlp_model(), model);
  make_bundle(model.string(), dir / "a", dir / "long.ortfleet");
  const CacheBundle imported = ModelCache((dir / "b").string()).import_bundle((dir / "long.ortfleet").string());
  ASSERT_EQ(imported.entries.size(), 1u);
  EXPECT_EQ(imported.entries.front().outcome, "added");
  EXPECT_EQ(start_with_bundle_cache(model.string(), dir / "b").outcome, "hit");
}

TEST(CacheBundle, ExportSaysWhatItMissedAndRefusesToWriteAnEmptyBundle) {
  const fs::path dir = fresh_bundle_dir("export-missing");
  start_with_bundle_cache(test::mlp_model(), dir / "cache");
  const CacheBundle b =
      ModelCache((dir / "cache").string()).export_bundle({test::mlp_model(), test::resnet18_model()}, {Device::cpu()}, {}, (dir / "b").string());
  ASSERT_EQ(b.entries.size(), 2u);
  EXPECT_EQ(b.entries[0].outcome, "exported");
  EXPECT_EQ(b.entries[1].outcome, "missing");
  const Error none = test::error_from(
      [&] { ModelCache((dir / "cache").string()).export_bundle({test::resnet18_model()}, {Device::cpu()}, {}, (dir / "none").string()); });
  EXPECT_NE(none.what_failed().find("nothing to export"), std::string::npos) << none.what_failed();
  EXPECT_FALSE(fs::exists(dir / "none"));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"b", "cache"})) << "no partial file is left";
}

// "exported 2 entries" for one: an entry asked for twice is in the bundle once, and said so.
TEST(CacheBundle, AnEntryAskedForTwiceIsExportedOnceAndCountedOnce) {
  const fs::path dir = fresh_bundle_dir("export-twice");
  start_with_bundle_cache(test::mlp_model(), dir / "cache");
  fs::copy_file(test::mlp_model(), dir / "same.onnx");
  const CacheBundle b = ModelCache((dir / "cache").string())
                            .export_bundle({test::mlp_model(), test::mlp_model(), (dir / "same.onnx").string()}, {Device::cpu()}, {}, (dir / "b").string());
  ASSERT_EQ(b.entries.size(), 3u);
  EXPECT_EQ(std::count_if(b.entries.begin(), b.entries.end(), [](const BundleEntry& e) { return e.outcome == "exported"; }), 1);
  EXPECT_EQ(b.entries[1].outcome.rfind("in the bundle once, as " + fs::path(test::mlp_model()).filename().string() + " for cpu-", 0), 0u)
      << b.entries[1].outcome;
  EXPECT_EQ(b.entries[2].outcome.rfind("in the bundle once", 0), 0u) << b.entries[2].outcome;
  EXPECT_EQ(ModelCache((dir / "c").string()).import_bundle((dir / "b").string()).entries.size(), 1u);
}

// The bundle is an output like every other (docs/guarantees.md): the model, its weights and a file that
// is not a bundle are left as they are; a bundle is replaced keeping its mode; a link is written
// through; a pipe or device is written, never replaced.
TEST(CacheBundle, ExportReplacesOnlyABundleAndNeverWhatItReads) {
  const fs::path dir = fresh_bundle_dir("export-out");
  const std::string model = write_small_transformer_copy(dir);
  start_with_bundle_cache(model, dir / "cache");
  const ModelCache cache((dir / "cache").string());
  const auto export_to = [&](const fs::path& out) { cache.export_bundle({model}, {Device::cpu()}, {}, out.string()); };
  for (const std::string& input : {model, model + ".data"}) {
    const std::string before = test::read_all(input);
    const std::string e = test::error_of([&] { export_to(input); });
    EXPECT_NE(e.find("the bundle " + input + " "), std::string::npos) << e;
    EXPECT_EQ(test::read_all(input), before) << input << " changed";
  }
  const fs::path notes = dir / "notes.txt";
  { std::ofstream(notes) << "my notes"; }
  ::chmod(notes.c_str(), 0600);
  EXPECT_NE(test::error_of([&] { export_to(notes); }).find("exists and is not a cache bundle"), std::string::npos);
  EXPECT_EQ(test::read_all(notes), "my notes");
  fs::create_symlink(notes, dir / "link-to-notes");
  EXPECT_NE(test::error_of([&] { export_to(dir / "link-to-notes"); }).find("is not a cache bundle"), std::string::npos);
  EXPECT_EQ(test::read_all(notes), "my notes");
  // A bundle of its own: replaced, keeping its mode; through a link, the link stays.
  export_to(dir / "b.ortfleet");
  ::chmod((dir / "b.ortfleet").c_str(), 0600);
  fs::create_symlink(dir / "b.ortfleet", dir / "link.ortfleet");
  export_to(dir / "link.ortfleet");
  EXPECT_TRUE(fs::is_symlink(dir / "link.ortfleet"));
  EXPECT_EQ(fs::status(dir / "b.ortfleet").permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(ModelCache((dir / "imported").string()).import_bundle((dir / "b.ortfleet").string()).entries.front().outcome, "added");
  // A pipe nobody reads: an error at once. /dev/null: written, still the device.
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  const int code = test::exit_code_within(60, [&] {
    return test::error_of([&] { export_to(dir / "pipe"); }).find("a named pipe no process reads") != std::string::npos ? 0 : 1;
  });
  EXPECT_EQ(code, 0) << (code < 0 ? "it waited for a reader" : "another error");
  export_to("/dev/null");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

// Import reads bundles only from regular files: a pipe without a writer blocked open() forever, and a
// file of zeros was read to its end before it was called no bundle.
TEST(CacheBundle, ImportRefusesWhatIsNotARegularFileBeforeOpeningIt) {
  const fs::path dir = fresh_bundle_dir("import-special");
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  const int code = test::exit_code_within(60, [&] {
    const std::string e = test::error_of([&] { ModelCache((dir / "cache").string()).import_bundle((dir / "pipe").string()); });
    return e.find("the bundle " + (dir / "pipe").string() + " is a named pipe, not a file") != std::string::npos ? 0 : 1;
  });
  EXPECT_EQ(code, 0) << (code < 0 ? "the import waited on the pipe" : "another error");
  EXPECT_NE(test::error_of([&] { ModelCache((dir / "cache").string()).import_bundle(dir.string()); }).find("is a folder, not a file"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { ModelCache((dir / "cache").string()).import_bundle("/dev/zero"); }).find("is a device, not a file"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "cache")) << "a refused import made the cache";
}

TEST(CacheBundle, AFileOfZerosIsRefusedAtItsFirstBlock) {
  const fs::path dir = fresh_bundle_dir("import-zeros");
  // A terabyte of zeros (sparse: it takes no disk), which read to its end would take hours.
  const fs::path zeros = dir / "zeros.ortfleet";
  { std::ofstream(zeros) << ""; }
  fs::resize_file(zeros, uint64_t{1} << 40);
  const int code = test::exit_code_within(60, [&] {
    const std::string e = test::error_of([&] { ModelCache((dir / "cache").string()).import_bundle(zeros.string()); });
    return e.find("starts with a block of zeros") != std::string::npos ? 0 : 1;
  });
  EXPECT_EQ(code, 0) << (code < 0 ? "the import read the zeros to their end" : "another error");
  // A bundle followed by more zeros than any writer pads with is refused too, without reading them all.
  make_bundle(test::mlp_model(), dir / "a", dir / "b.ortfleet");
  fs::resize_file(dir / "b.ortfleet", fs::file_size(dir / "b.ortfleet") + (uint64_t{1} << 40));
  const int padded = test::exit_code_within(60, [&] {
    const std::string e = test::error_of([&] { ModelCache((dir / "cache").string()).import_bundle((dir / "b.ortfleet").string()); });
    return e.find("has bytes after the end of its archive") != std::string::npos ? 0 : 1;
  });
  EXPECT_EQ(padded, 0) << (padded < 0 ? "the import read the zeros to their end" : "another error");
}

TEST(CacheBundle, ShapeCostsAndTheGainTravelWithTheEntry) {
  const fs::path dir = fresh_bundle_dir("companions");
  start_with_bundle_cache(test::mlp_model(), dir / "a");
  const std::string entry = ModelCache((dir / "a").string()).entries().front().path;
  detail::record_entry_gain(entry, {50, 10});
  std::ofstream(entry + ".shape-costs.json") << R"({"steady_ms": 1, "switch_ms": 2, "new_session_ms": 3, "conditions": "x"})";
  ModelCache((dir / "a").string()).export_bundle({test::mlp_model()}, {Device::cpu()}, {}, (dir / "b.ortfleet").string());
  const CacheBundle imported = ModelCache((dir / "b").string()).import_bundle((dir / "b.ortfleet").string());
  const std::string copy = (dir / "b" / fs::path(entry).filename()).string();
  EXPECT_EQ(test::read_all(copy + ".shape-costs.json"), test::read_all(entry + ".shape-costs.json"));
  ASSERT_TRUE(detail::gain_of(copy));
  EXPECT_EQ(detail::gain_of(copy)->entry_ms, 10);
  EXPECT_EQ(imported.entries.front().load_note, (detail::EntryGain{50, 10}.text()));
}

TEST(CacheBundle, EveryRefusalLeavesTheCacheAsItWas) {
  const fs::path dir = fresh_bundle_dir("refusals");
  const fs::path good = dir / "good.ortfleet";
  make_bundle(test::small_transformer(), dir / "source", good);
  const fs::path cache = lived_in_cache("refusals-target");
  const std::string whole = test::read_all(good);
  const auto variant = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary | std::ios::trunc) << bytes;
    return dir / name;
  };
  const auto forged = [&](const std::string& name, const std::function<void(json&, std::vector<Member>&)>& edit, bool fix_sums = true) {
    forge(good, dir / name, edit, fix_sums);
    return dir / name;
  };
  const auto& members = members_of(good);
  ASSERT_GE(members.size(), 4u);  // the manifest, the weights, the entry's manifest, the graph

  // Damaged or truncated.
  expect_refused(variant("truncated.ortfleet", whole.substr(0, whole.size() / 2)), cache, "truncated");
  expect_refused(variant("no-end.ortfleet", whole.substr(0, whole.size() - 1024)), cache, "truncated");
  std::string flipped = whole;
  const size_t in_weights = whole.find(members[1].bytes.substr(0, 64)) + members[1].bytes.size() / 2;
  ASSERT_LT(in_weights, whole.size());
  flipped[in_weights] = static_cast<char>(flipped[in_weights] ^ 0x55);
  expect_refused(variant("flipped.ortfleet", flipped), cache, "checksum");
  expect_refused(variant("text.ortfleet", "these are my notes\n"), cache, "not an ortfleet cache bundle");
  expect_refused(forged("wrong-sum.ortfleet", [&](json&, std::vector<Member>& m) { m[0].bytes[0] = static_cast<char>(m[0].bytes[0] ^ 1); }, false),
                 cache, "does not match its checksum");
  expect_refused(forged("wrong-size.ortfleet", [&](json&, std::vector<Member>& m) { m[0].bytes += "x"; }, false), cache, "bytes, its manifest says");
  expect_refused(forged("missing-member.ortfleet", [&](json&, std::vector<Member>& m) { m.erase(m.begin()); }, false), cache, "it lacks");
  // Another kind of machine, runtime or build.
  expect_refused(forged("gpu.ortfleet", [](json& j, std::vector<Member>&) { j["entries"][0]["device_class"] = "cuda-sm_80"; }), cache,
                 "made for cuda-sm_80 (GPU architecture sm_80)");
  expect_refused(forged("cpu.ortfleet", [](json& j, std::vector<Member>&) { j["entries"][0]["device_class"] = "cpu-0123456789abcdef"; }), cache,
                 "another CPU");
  expect_refused(forged("ort.ortfleet", [](json& j, std::vector<Member>&) { j["onnxruntime_version"] = "1.31.0"; }), cache,
                 "made by ONNX Runtime 1.31.0");
  expect_refused(forged("build.ortfleet", [](json& j, std::vector<Member>&) { j["ortfleet_version"] = "9.9.9"; }), cache, "made by ortfleet 9.9.9");
  expect_refused(forged("format.ortfleet", [](json& j, std::vector<Member>&) { j["cache_entry_format"] = 2; }), cache, "cache format 2");
  expect_refused(forged("bundle-format.ortfleet", [](json& j, std::vector<Member>&) { j["ortfleet_bundle"] = 7; }), cache, "format 7");
  // A manifest of another shape: said in the JSON reader's words, without its C++ name (issue 58's re-audit, U4).
  expect_refused(forged("array-manifest.ortfleet", [](json& j, std::vector<Member>&) { j = json::array({1}); }, false), cache,
                 "lacks what a bundle's manifest holds (cannot use value() with array)");
  // Paths that escape the cache, links, folders, members nobody listed, twice the same member.
  const auto planted = [](const std::string& name) {
    return [name](json&, std::vector<Member>& m) { m.insert(m.begin(), Member{name, "x", '0', {}}); };
  };
  expect_refused(forged("absolute.ortfleet", planted("/tmp/ortfleet-bundle-escape")), cache, "an absolute path");
  expect_refused(forged("dotdot.ortfleet", planted("models/../../escape")), cache, "climbs out of the cache");
  EXPECT_FALSE(fs::exists("/tmp/ortfleet-bundle-escape"));
  expect_refused(forged("symlink.ortfleet", [](json&, std::vector<Member>& m) { m.insert(m.begin(), Member{"models/x.onnx", "", '2', "/etc/passwd"}); }),
                 cache, "symbolic link to /etc/passwd");
  expect_refused(forged("hardlink.ortfleet", [](json&, std::vector<Member>& m) { m.insert(m.begin(), Member{"models/x.onnx", "", '1', "/etc/passwd"}); }),
                 cache, "hard link");
  expect_refused(forged("folder.ortfleet", [](json&, std::vector<Member>& m) { m.insert(m.begin(), Member{"models/sub", "", '5', {}}); }), cache,
                 "is a folder");
  expect_refused(forged("unlisted.ortfleet", [](json&, std::vector<Member>& m) { m.push_back(Member{"models/extra.so", "x", '0', {}}); }), cache,
                 "is not in its manifest");
  expect_refused(forged("twice.ortfleet", [](json&, std::vector<Member>& m) { m.push_back(m[0]); }), cache, "comes twice");
  // A manifest that lists what is no entry's, or vouches for other bytes.
  expect_refused(forged("foreign-file.ortfleet", [](json& j, std::vector<Member>&) { j["members"].push_back({{"name", "models/evil.so"}, {"bytes", 1}, {"xxh64", "0"}}); }),
                 cache, "no file of an entry");
  expect_refused(forged("wrong-name.ortfleet", [](json& j, std::vector<Member>&) { j["entries"][0]["name"] = "other-0000000000000000.onnx"; }), cache,
                 "is not the name its key gives");
  expect_refused(forged("entry-manifest.ortfleet",
                        [](json&, std::vector<Member>& m) {
                          for (auto& member : m) {
                            if (!member.name.ends_with(".manifest.json")) continue;
                            json em = json::parse(member.bytes);
                            em["files"][0]["xxh64"] = "0000000000000000";
                            member.bytes = em.dump();
                          }
                        }),
                 cache, "does not vouch for the files");
  // None of them left a staging folder in the cache.
  for (const auto& e : fs::recursive_directory_iterator(cache)) EXPECT_EQ(e.path().string().find(".import-"), std::string::npos) << e.path();
  // The good one still imports.
  EXPECT_EQ(ModelCache((cache / "models").string()).import_bundle(good.string()).entries.front().outcome, "added");
}

TEST(CacheBundle, ClearRemovesWhatKilledImportsOfThisHostLeftAndNoOtherHostsStaging) {
  const fs::path cache = fresh_bundle_dir("sweep");
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);
  // pid 999999999 exceeds every pid_max: that import is dead. Another host's pid means nothing here.
  const fs::path dead = cache / (std::string(".import-") + host + "-999999999-abcdef");
  const fs::path alive = cache / (std::string(".import-") + host + "-" + std::to_string(::getpid()) + "-abcdef");
  const fs::path elsewhere = cache / ".import-another-node-999999999-abcdef";
  for (const auto& folder : {dead, alive, elsewhere}) {
    fs::create_directories(folder);
    std::ofstream(folder / "member") << "bytes";
  }
  ModelCache(cache.string()).clear();
  EXPECT_FALSE(fs::exists(dead)) << "a dead import's staging folder stays after clear";
  EXPECT_TRUE(fs::exists(alive)) << "a running import's staging folder was removed";
  EXPECT_TRUE(fs::exists(elsewhere)) << "another host's import, which may be running, lost its staging folder";
}

TEST(CacheBundle, AnEntryThisMachineRejectedOrOneInUseIsNotReplaced) {
  const fs::path dir = fresh_bundle_dir("not-replaced");
  make_bundle(test::mlp_model(), dir / "a", dir / "b.ortfleet");
  const fs::path target = dir / "target";
  fs::create_directories(target);
  ::chmod(target.c_str(), 0700);
  const std::string entry = (target / members_of(dir / "b.ortfleet").back().name.substr(7)).string();
  {
    detail::FileLock reader;  // a start reading (or writing) the entry
    ASSERT_TRUE(reader.try_lock(entry + ".lock", detail::FileLock::Mode::shared));
    EXPECT_EQ(ModelCache(target.string()).import_bundle((dir / "b.ortfleet").string()).entries.front().outcome, "in use");
    EXPECT_FALSE(fs::exists(entry));
  }
  std::ofstream(entry + ".rejected.json") << R"({"key": "k", "reason": "its outputs differed"})";
  EXPECT_EQ(ModelCache(target.string()).import_bundle((dir / "b.ortfleet").string()).entries.front().outcome, "rejected here");
  EXPECT_FALSE(fs::exists(entry));
  fs::remove(entry + ".rejected.json");
  // What a writer killed halfway left (weights and a manifest, no graph) is replaced whole.
  std::ofstream(entry + ".data") << "half";
  std::ofstream(entry + ".manifest.json") << "{";
  EXPECT_EQ(ModelCache(target.string()).import_bundle((dir / "b.ortfleet").string()).entries.front().outcome, "added");
  EXPECT_EQ(detail::check_entry(entry, ModelCache(target.string()).key_text(test::mlp_model(), Device::cpu(), {})), "");
}

// The shared layer: read before the local cache, never written.

TEST(SharedCacheLayer, AHitComesFromTheSharedLayerAndNothingIsWrittenThere) {
  const fs::path dir = fresh_bundle_dir("shared-hit");
  const std::string model = test::small_transformer();
  const auto want = start_with_bundle_cache(model).output;
  make_bundle(model, dir / "a", dir / "b.ortfleet");
  ModelCache((dir / "shared" / "models").string()).import_bundle((dir / "b.ortfleet").string(), /*shared_layer=*/true);
  for (const auto& e : fs::recursive_directory_iterator(dir / "shared")) {
    if (e.path().extension() == ".lock") continue;  // the importer's; readers of the layer never open it
    const auto mode = fs::status(e.path()).permissions();
    EXPECT_EQ(mode & fs::perms::others_read, fs::perms::others_read) << e.path() << ": other users cannot read it";
    EXPECT_EQ(mode & (fs::perms::group_write | fs::perms::others_write), fs::perms::none) << e.path();
  }
  const auto before = snapshot(dir / "shared");
  for (int i = 0; i < 2; ++i) {
    const BundleStart s = start_with_bundle_cache(model, dir / "local", dir / "shared");
    EXPECT_EQ(s.outcome, "hit");
    EXPECT_NE(s.note.find("from the shared layer " + (dir / "shared").string()), std::string::npos) << s.note;
    test::expect_same_values(want, s.output);
  }
  EXPECT_EQ(snapshot(dir / "shared"), before) << "a start wrote into the shared layer";
  EXPECT_TRUE(ModelCache((dir / "local").string()).entries().empty()) << "a shared hit made a local entry too";
}

TEST(SharedCacheLayer, ItsManifestIsNeverRewrittenAndItsHashesAreRememberedLocally) {
  const fs::path dir = fresh_bundle_dir("shared-memo");
  const std::string entry = shared_entry(test::mlp_model(), dir);
  const std::string manifest = test::read_all(entry + ".manifest.json");
  const std::string key = ModelCache((dir / "a").string()).key_text(test::mlp_model(), Device::cpu(), {});
  // Copied here, the files' identities differ from the manifest's: checked by their content, into a
  // memo in the local folder, never by rewriting the shared manifest.
  fs::create_directories(dir / "local");
  ::chmod((dir / "local").c_str(), 0700);
  EXPECT_EQ(detail::check_entry(entry, key, {true, (dir / "local").string()}), "");
  EXPECT_EQ(test::read_all(entry + ".manifest.json"), manifest);
  // Bytes changed in place, same size: caught, however the identity looks.
  std::fstream(entry + ".data", std::ios::in | std::ios::out | std::ios::binary).write("\x7f\x7f\x7f\x7f", 4);
  EXPECT_NE(detail::check_entry(entry, key, {true, (dir / "local").string()}).find("content hash differs"), std::string::npos);
  EXPECT_EQ(test::read_all(entry + ".manifest.json"), manifest);
}

TEST(SharedCacheLayer, ADamagedSharedEntryIsSkippedWithAWarningAndLeftAsItIs) {
  const fs::path dir = fresh_bundle_dir("shared-damaged");
  const std::string model = test::small_transformer();
  const auto want = start_with_bundle_cache(model).output;
  const std::string entry = shared_entry(model, dir);
  fs::resize_file(entry + ".data", fs::file_size(entry + ".data") / 2);
  const auto before = snapshot(dir / "shared");
  test::CapturedLog log;
  const BundleStart first = start_with_bundle_cache(model, dir / "local", dir / "shared");
  test::expect_same_values(want, first.output);
  EXPECT_EQ(first.note.find("shared"), std::string::npos) << first.note;
  EXPECT_EQ(log.count("the shared model cache entry " + entry + " is not used"), 1u);
  EXPECT_EQ(snapshot(dir / "shared"), before) << "the damaged shared entry was touched";
  // The local cache took over: its own entry, made from the model.
  const BundleStart local = start_with_bundle_cache(model, dir / "local", dir / "shared");
  EXPECT_EQ(local.outcome, "hit");
  EXPECT_EQ(local.note.find("shared"), std::string::npos) << local.note;
  test::expect_same_values(want, local.output);
}

TEST(SharedCacheLayer, AnEntryThatFailsToLoadIsNotRejectedThere) {
  const fs::path dir = fresh_bundle_dir("shared-unloadable");
  const std::string model = test::small_transformer();
  const auto want = start_with_bundle_cache(model).output;
  const std::string entry = shared_entry(model, dir);
  test::make_unloadable(entry);
  const auto before = snapshot(dir / "shared");
  const BundleStart s = start_with_bundle_cache(model, dir / "local", dir / "shared");
  test::expect_same_values(want, s.output);
  EXPECT_EQ(s.outcome, "rejected");
  EXPECT_EQ(snapshot(dir / "shared"), before) << "the shared layer was written";
}

// Another user made root's start run their graph when the layer sat in a 0777 folder without the sticky
// bit, when models/ was group-writable and when the entry files were 0666: every component up to / is
// checked, and the one that fails is named.
TEST(SharedCacheLayer, AFolderOrFileAnotherUserCouldChangeIsNotUsedAndNamed) {
  const fs::path dir = fresh_bundle_dir("shared-open");
  const std::string entry = shared_entry(test::mlp_model(), dir / "layers");
  const fs::path layer = dir / "layers" / "shared";
  struct Case {
    fs::path path;
    mode_t mode;
    std::string named;
  };
  const std::vector<Case> cases = {
      {dir / "layers", 0777, "the folder " + (dir / "layers").string() + " above " + (layer / "models").string() + " can be written by other users (mode 0777, not sticky)"},
      {layer / "models", 0775, "the folder " + (layer / "models").string() + " can be written by other users (mode 0775)"},
      {layer / "models", 0777, "the folder " + (layer / "models").string() + " can be written by other users (mode 0777)"},
      {entry, 0666, entry + " can be written by other users (mode 0666)"},
      {entry + ".data", 0664, entry + ".data can be written by other users (mode 0664)"},
      {entry + ".manifest.json", 0666, entry + ".manifest.json can be written by other users (mode 0666)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.named);
    struct stat st {};
    ASSERT_EQ(::stat(c.path.c_str(), &st), 0);
    const mode_t before = st.st_mode & 07777;
    ASSERT_EQ(::chmod(c.path.c_str(), c.mode), 0);
    test::CapturedLog log;
    const BundleStart s = start_with_bundle_cache(test::mlp_model(), dir / "local", layer);
    EXPECT_EQ(s.note.find("shared"), std::string::npos) << s.note;
    EXPECT_EQ(log.count(c.named), 1u) << log.text();
    const auto listed = ModelCache((layer / "models").string()).entries(/*private_folder=*/false);
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_FALSE(listed.front().used) << "cache list says a refused entry is used";
    EXPECT_NE(listed.front().skipped.find("refused: " + c.named), std::string::npos) << listed.front().skipped;
    ASSERT_EQ(::chmod(c.path.c_str(), before), 0);
    fs::remove_all(dir / "local");
  }
  // Sticky, as /tmp: others may add names there but not replace the layer's. Used.
  ASSERT_EQ(::chmod((dir / "layers").c_str(), 01777), 0);
  EXPECT_NE(start_with_bundle_cache(test::mlp_model(), dir / "local", layer).note.find("from the shared layer"), std::string::npos);
  EXPECT_EQ(ModelCache((layer / "models").string()).entries(/*private_folder=*/false).front().skipped, "");
}

TEST(SharedCacheLayer, AFolderOrFileOfAnotherUserIsNotUsed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give files to another user";
  const fs::path dir = fresh_bundle_dir("shared-theirs");
  const std::string entry = shared_entry(test::mlp_model(), dir);
  const fs::path models = dir / "shared" / "models";
  for (const fs::path& theirs : {fs::path(entry), models}) {
    SCOPED_TRACE(theirs.string());
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    const auto listed = ModelCache(models.string()).entries(/*private_folder=*/false);
    EXPECT_NE(listed.front().skipped.find(theirs.string() + " belongs to"), std::string::npos) << listed.front().skipped;
    EXPECT_EQ(start_with_bundle_cache(test::mlp_model(), dir / "local", dir / "shared").note.find("shared"), std::string::npos);
    ASSERT_EQ(::chown(theirs.c_str(), 0, 0), 0);
  }
  // The layer's owner is whom its readers trust: a layer all of one other user's is used.
  for (const auto& e : fs::recursive_directory_iterator(dir / "shared")) ASSERT_EQ(::lchown(e.path().c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chown((dir / "shared").c_str(), 65534, 65534), 0);
  EXPECT_NE(start_with_bundle_cache(test::mlp_model(), dir / "local2", dir / "shared").note.find("from the shared layer"), std::string::npos);
}

// import --shared made the layer in a folder every user can write: nothing is made there now.
TEST(SharedCacheLayer, ImportMakesNoLayerWhereAnotherUserCouldChangeIt) {
  const fs::path dir = fresh_bundle_dir("shared-import-open");
  make_bundle(test::mlp_model(), dir / "a", dir / "b.ortfleet");
  fs::create_directories(dir / "open");
  ASSERT_EQ(::chmod((dir / "open").c_str(), 0777), 0);
  const std::string e = test::error_of(
      [&] { ModelCache((dir / "open" / "layer" / "models").string()).import_bundle((dir / "b.ortfleet").string(), /*shared_layer=*/true); });
  EXPECT_NE(e.find("the folder " + (dir / "open").string() + " above " + (dir / "open" / "layer" / "models").string() +
                   " can be written by other users (mode 0777, not sticky)"),
            std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(dir / "open" / "layer")) << "the layer was made in a folder others can write";
}

// `cache import B --shared DIR` with DIR/models a symlink to another folder wrote the entry there (issue
// 50): the folder an import writes into is a folder, never a link, for the shared layer and the cache.
TEST(SharedCacheLayer, AnImportNeverWritesThroughALinkInPlaceOfTheModelsFolder) {
  const fs::path dir = fresh_bundle_dir("import-through-a-link");
  make_bundle(test::mlp_model(), dir / "a", dir / "b.ortfleet");
  for (const bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "--shared" : "the cache");
    const fs::path root = dir / (shared ? "layer" : "cache");
    const fs::path elsewhere = dir / (shared ? "elsewhere-layer" : "elsewhere-cache");
    fs::create_directories(root);
    fs::create_directories(elsewhere);
    fs::create_symlink(elsewhere, root / "models");
    const std::string e = test::error_of([&] { ModelCache((root / "models").string()).import_bundle((dir / "b.ortfleet").string(), shared); });
    EXPECT_NE(e.find((root / "models").string() + " is a symbolic link (to " + elsewhere.string() + "): an import writes into the folder it names"),
              std::string::npos)
        << e;
    EXPECT_TRUE(fs::is_empty(elsewhere)) << "the import wrote through the link";
    EXPECT_TRUE(fs::is_symlink(root / "models")) << "the link is left as it was";
  }
}

// docs/guarantees.md, import: an entry's files are renamed into place, never written through a link
// planted at one of its names; what such a link names is left as it was.
TEST(CacheBundle, AnImportNeverWritesThroughALinkAtAnEntrysName) {
  const fs::path dir = fresh_bundle_dir("import-over-links");
  make_bundle(test::mlp_model(), dir / "a", dir / "b.ortfleet");
  ModelCache((dir / "probe" / "models").string()).import_bundle((dir / "b.ortfleet").string());  // the names an import makes
  const fs::path target = dir / "target" / "models";
  fs::create_directories(target);
  ASSERT_EQ(::chmod((dir / "target").c_str(), 0700), 0);
  ASSERT_EQ(::chmod(target.c_str(), 0700), 0);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "probe" / "models")) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".import-", 0) == 0 || name.ends_with(".digests.json")) continue;
    names.push_back(name);
    std::ofstream(dir / ("victim-" + name)) << "precious " << name;
    fs::create_symlink(dir / ("victim-" + name), target / name);
  }
  ASSERT_GE(names.size(), 3u);
  (void)test::error_of([&] { ModelCache(target.string()).import_bundle((dir / "b.ortfleet").string()); });
  for (const auto& name : names) {
    EXPECT_EQ(test::read_all(dir / ("victim-" + name)), "precious " + name) << "written through the link at " << name;
  }
}

// docs/guarantees.md, import and --shared: nothing is imported into a folder of another user (as root,
// where this test can make one), and their folder is left as it was.
TEST(SharedCacheLayer, AnImportIntoAFolderOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a folder to another user";
  const fs::path dir = fresh_bundle_dir("import-theirs");
  make_bundle(test::mlp_model(), dir / "a", dir / "b.ortfleet");
  for (const bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "--shared" : "the cache");
    const fs::path models = dir / (shared ? "layer" : "cache") / "models";
    fs::create_directories(models);
    ASSERT_EQ(::chmod(models.c_str(), 0755), 0);
    ASSERT_EQ(::chown(models.c_str(), 65534, 65534), 0);
    const std::string e = test::error_of([&] { ModelCache(models.string()).import_bundle((dir / "b.ortfleet").string(), shared); });
    EXPECT_NE(e.find("the folder " + models.string() + " belongs to"), std::string::npos) << e;
    EXPECT_TRUE(fs::is_empty(models)) << "written into another user's folder";
  }
}

// A shared entry's graph that is a symbolic link was refused for "mode 0777", the link's own bits: it is
// refused for being a link (and a pipe for being a pipe), never read through.
TEST(SharedCacheLayer, AnEntryFileThatIsNotAFileIsRefusedForWhatItIs) {
  const fs::path dir = fresh_bundle_dir("shared-entry-link");
  const std::string entry = shared_entry(test::mlp_model(), dir);
  const fs::path models = dir / "shared" / "models";
  fs::rename(entry, dir / "graph-copy.onnx");
  fs::create_symlink(dir / "graph-copy.onnx", entry);
  auto listed = ModelCache(models.string()).entries(/*private_folder=*/false);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_NE(listed.front().skipped.find("refused: " + entry + " is a symbolic link, not a file"), std::string::npos) << listed.front().skipped;
  EXPECT_EQ(listed.front().skipped.find("mode 0777"), std::string::npos) << listed.front().skipped;
  EXPECT_EQ(start_with_bundle_cache(test::mlp_model(), dir / "local", dir / "shared").note.find("shared"), std::string::npos);
  fs::remove(entry);
  ASSERT_EQ(::mkfifo(entry.c_str(), 0644), 0);
  for (const auto& piped : ModelCache(models.string()).entries(/*private_folder=*/false)) EXPECT_FALSE(piped.used) << piped.path;
  std::string note;
  EXPECT_TRUE(test::finishes_without_waiting_on_pipe(entry, 60, [&] { note = start_with_bundle_cache(test::mlp_model(), dir / "local2", dir / "shared").note; }))
      << "a start waited on the pipe at " << entry;
  EXPECT_EQ(note.find("shared"), std::string::npos) << note;
  EXPECT_TRUE(fs::is_fifo(entry));
}

TEST(SharedCacheLayer, ItIsNamedByTheConfigElseTheEnvironment) {
  test::ScopedEnv env("ORTFLEET_CACHE_SHARED", "/from/env");
  EXPECT_EQ(ModelCache::shared_root(), "/from/env");
  RunConfig config;
  config.session.model_cache_shared = "/from/config";
  EXPECT_EQ(ModelCache::shared_root(config), "/from/config");
  EXPECT_EQ(RunConfig::from_json(config.to_json(), "test").session.model_cache_shared, "/from/config");
  test::ScopedEnv unset("ORTFLEET_CACHE_SHARED", std::nullopt);
  EXPECT_FALSE(ModelCache::shared_root());
}

}  // namespace ortfleet
