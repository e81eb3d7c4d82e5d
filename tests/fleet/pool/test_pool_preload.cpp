// What a node daemon makes resident as it starts (fleet/pool/pool_preload.hpp) and what it remembers
// across its restarts (fleet/pool/served_models.hpp), without a process: the choice within a budget,
// and the daemon's memory kept private, whole and checked.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fleet/pool/pool_preload.hpp"
#include "fleet/pool/served_models.hpp"
#include "fleet/worker/wire.hpp"
#include "test_support.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
PreloadItem item(PreloadItem::Source source, const std::string& model, uint64_t bytes, double last_used_s = 0, int warmup = 1) {
  PreloadItem i;
  i.source = source;
  i.model = model;
  i.device = Device::cpu(0);
  i.plan = default_plan(model, i.device, 1, RunConfig{});
  i.plan.warmup_runs = warmup;  // another plan of the same model: another session
  i.bytes = bytes;
  i.last_used_s = last_used_s;
  return i;
}

std::vector<std::string> models_of(const PreloadChoice& c) {
  std::vector<std::string> out;
  for (const auto& i : c.chosen) out.push_back(i.model + (i.plan.warmup_runs != 1 ? "*" + std::to_string(i.plan.warmup_runs) : ""));
  return out;
}

using Source = PreloadItem::Source;
}  // namespace

TEST(PoolPreload, NamedFirstThenServedMostRecentFirstThenTheCachesWithinTheBudget) {
  const std::vector<PreloadItem> items = {
      item(Source::cached, "/m/cached", 10),     item(Source::served, "/m/old", 10, 100), item(Source::named, "/m/b", 10),
      item(Source::served, "/m/recent", 10, 300), item(Source::named, "/m/a", 10),       item(Source::served, "/m/middle", 10, 200),
  };
  EXPECT_EQ(models_of(choose_preload(items, 1000)),
            (std::vector<std::string>{"/m/b", "/m/a", "/m/recent", "/m/middle", "/m/old", "/m/cached"}));
  // 35 bytes hold three: the least recently used and the cache's are left out, each with a line.
  const PreloadChoice tight = choose_preload(items, 35);
  EXPECT_EQ(models_of(tight), (std::vector<std::string>{"/m/b", "/m/a", "/m/recent"}));
  ASSERT_EQ(tight.left_out.size(), 3u);
  EXPECT_NE(tight.left_out.front().find("/m/middle on cpu (served before, "), std::string::npos) << tight.left_out.front();
  EXPECT_NE(tight.left_out.front().find("over the preload budget"), std::string::npos);
  // A small one later in the order still fits where a large one did not.
  const PreloadChoice skipping = choose_preload({item(Source::named, "/m/big", 100), item(Source::served, "/m/small", 5, 1)}, 50);
  EXPECT_EQ(models_of(skipping), std::vector<std::string>{"/m/small"});
  EXPECT_TRUE(choose_preload(items, 0).chosen.empty());
}

TEST(PoolPreload, EachSessionOnceAndANamedModelServedBeforeWithItsServedPlan) {
  const std::vector<PreloadItem> items = {
      item(Source::named, "/m/a", 10),
      item(Source::named, "/m/a", 10),                  // named twice
      item(Source::served, "/m/a", 10, 5, /*warmup=*/3),  // served with its own plan: that one is made, not the default
      item(Source::served, "/m/a", 10, 4, /*warmup=*/4),  // and with another: both were sessions jobs used
      item(Source::cached, "/m/a", 10),                 // made already
      item(Source::cached, "/m/c", 10),
  };
  EXPECT_EQ(models_of(choose_preload(items, 1000)), (std::vector<std::string>{"/m/a*3", "/m/a*4", "/m/c"}));
}

TEST(PoolPreload, TheDefaultPlanIsTheOneAFleetSendsWithItsDefaults) {
  const LocalStartPlan plan = default_plan("/m/a.onnx", Device::cpu(1), 4, RunConfig{});
  EXPECT_EQ(plan.devices, std::vector<Device>{Device::cpu(1)});
  EXPECT_EQ(plan.fleet_size, 4);
  EXPECT_EQ(plan.warmup_runs, 1);
  EXPECT_EQ(plan.mode, LocalMode::overlapped);
  RunConfig with_list;
  with_list.warm_pool.preload = {"/m/a.onnx"};
  EXPECT_TRUE(default_plan("/m/a.onnx", Device::cpu(0), 1, with_list).config.warm_pool.preload.empty()) << "the daemon's own list is no session's setting";
}

// --- the daemon's memory -----------------------------------------------------------------------------------

namespace {
LocalStartPlan served_plan(const std::string& model) { return default_plan(model, Device::cpu(0), 1, RunConfig{}); }
}  // namespace

TEST(ServedModels, WhatADaemonServedIsRememberedPrivatelyAndReadBackWithItsContent) {
  const fs::path dir = test::fresh_dir("served-remembered") / "state";
  const std::string model = fs::absolute(test::mlp_model()).string();
  {
    ServedModels memory(dir.string());
    EXPECT_TRUE(memory.load().empty());
    memory.note(served_plan(model));
    memory.note(served_plan("relative.onnx"));  // never remembered: the daemon works in /
    EXPECT_EQ(memory.save(), "");
  }
  struct stat st {};
  ASSERT_EQ(::stat((dir / ServedModels::kFileName).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ServedModels again(dir.string());
  const auto remembered = again.load();
  ASSERT_EQ(remembered.size(), 1u);
  EXPECT_EQ(remembered[0].model, model);
  EXPECT_EQ(remembered[0].device, "cpu");
  EXPECT_EQ(remembered[0].content, model_now(model)->content);
  EXPECT_EQ(remembered[0].bytes, fs::file_size(model));
  EXPECT_EQ(plan_from_json(remembered[0].plan).model_path, model);
}

TEST(ServedModels, ADamagedOrForeignMemoryIsSetAsideOrLeftUnread) {
  const fs::path dir = test::fresh_dir("served-damaged") / "state";
  const std::string model = fs::absolute(test::mlp_model()).string();
  {
    ServedModels memory(dir.string());
    memory.load();
    memory.note(served_plan(model));
    ASSERT_EQ(memory.save(), "");
  }
  const fs::path file = dir / ServedModels::kFileName;
  const std::string whole = test::read_all(file);
  // Hand-edited (another model slipped in): its checksum no longer holds.
  std::string edited = whole;
  edited.replace(edited.find(model), model.size(), "/etc/evil.onnx");
  { std::ofstream(file) << edited; }
  ::chmod(file.c_str(), 0600);
  EXPECT_TRUE(ServedModels(dir.string()).load().empty());
  EXPECT_FALSE(fs::exists(file));
  EXPECT_TRUE(fs::exists(file.string() + ".set-aside"));
  // Writable by the group: not read at all (and left where it is).
  { std::ofstream(file) << whole; }
  ::chmod(file.c_str(), 0620);
  EXPECT_TRUE(ServedModels(dir.string()).load().empty());
  EXPECT_TRUE(fs::exists(file));
  // A symbolic link in its place: not followed.
  fs::remove(file);
  const fs::path elsewhere = test::fresh_dir("served-elsewhere") / "served.json";
  { std::ofstream(elsewhere) << whole; }
  ::chmod(elsewhere.c_str(), 0600);
  fs::create_symlink(elsewhere, file);
  EXPECT_TRUE(ServedModels(dir.string()).load().empty());
  // In a folder others can write: not read.
  fs::remove(file);
  { std::ofstream(file) << whole; }
  ::chmod(file.c_str(), 0600);
  ::chmod(dir.c_str(), 0777);
  EXPECT_TRUE(ServedModels(dir.string()).load().empty());
  ::chmod(dir.c_str(), 0700);
  EXPECT_EQ(ServedModels(dir.string()).load().size(), 1u) << "the same file, private again, is read";
}

TEST(ServedModels, AMemoryIsNeverOverwrittenUnreadAndKeepsTheMostRecent) {
  const fs::path dir = test::fresh_dir("served-kept") / "state";
  const std::string model = fs::absolute(test::mlp_model()).string();
  {
    ServedModels first(dir.string());
    first.load();
    first.note(served_plan(model));
    ASSERT_EQ(first.save(), "");
  }
  ServedModels unread(dir.string());
  unread.note(served_plan(fs::absolute(test::identity_model()).string()));
  EXPECT_NE(unread.save(), "") << "a daemon that never read the memory overwrote it";
  ServedModels reader(dir.string());
  EXPECT_EQ(reader.load().size(), 1u);
  // Noted models join the remembered ones; more than kMaxRemembered keep the most recent.
  for (size_t i = 0; i < ServedModels::kMaxRemembered + 5; ++i) {
    LocalStartPlan plan = served_plan(model);
    plan.warmup_runs = static_cast<int>(i + 2);
    reader.note(plan);
  }
  ASSERT_EQ(reader.save(), "");
  ServedModels back(dir.string());
  const auto kept = back.load();
  ASSERT_EQ(kept.size(), ServedModels::kMaxRemembered);
  EXPECT_EQ(plan_from_json(kept.front().plan).warmup_runs, static_cast<int>(ServedModels::kMaxRemembered + 6)) << "the most recent first";
}

TEST(ServedModels, AModelWhoseFileChangedIsNotMadeAgain) {
  const fs::path dir = test::fresh_dir("served-changed");
  const std::string model = (dir / "m.onnx").string();
  fs::copy_file(test::mlp_model(), model);
  ServedModels memory((dir / "state").string());
  memory.load();
  memory.note(served_plan(fs::absolute(model).string()));
  ASSERT_EQ(memory.save(), "");
  const auto remembered = ServedModels((dir / "state").string()).load();
  std::vector<std::string> left_out;
  PreloadOptions options;
  EXPECT_EQ(preload_items(options, {Device::cpu(0)}, RunConfig{}, remembered, left_out).size(), 1u);
  EXPECT_TRUE(left_out.empty());
  test::copy_with_other_weights(test::mlp_model(), dir / "m.onnx");  // rewritten in place: other weights
  EXPECT_TRUE(preload_items(options, {Device::cpu(0)}, RunConfig{}, remembered, left_out).empty());
  ASSERT_EQ(left_out.size(), 1u);
  EXPECT_NE(left_out[0].find("its file changed since it was served"), std::string::npos) << left_out[0];
  // And a device this daemon does not serve is passed over without a word.
  left_out.clear();
  EXPECT_TRUE(preload_items(options, {Device::cpu(1)}, RunConfig{}, remembered, left_out).empty());
  EXPECT_TRUE(left_out.empty());
}

}  // namespace ortfleet::detail
