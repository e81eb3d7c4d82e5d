#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/private_dir.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/fleet/start_record.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
StartRecord two_h200() {
  StartRecord r;
  r.gpus = {"NVIDIA H200", "NVIDIA H200"};
  r.device_count = 2;
  r.measured_at = "2026-11-23T06:00:00Z";
  r.model = "resnet50.onnx";
  r.start_ms = {{StartWay::workers, 741}, {StartWay::threads, 1210}};
  return r;
}
}  // namespace

TEST(StartRecord, RoundTripsThroughItsFileForTheMachineItWasMadeOn) {
  const detail::PrivateDir root = detail::PrivateDir::temporary("ortfleet-test-records");
  const StartRecord r = two_h200();
  EXPECT_EQ(r.described(), "2 x NVIDIA H200, bench of 2026-11-23");
  save_start_record(r, root.path().string());
  EXPECT_EQ(start_record_path(2, root.path().string()), (root.path() / "start-records" / "gpus-2.json").string());
  struct stat st {};
  ASSERT_EQ(::stat(start_record_path(2, root.path().string()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u) << "only its user may read or change it";

  const auto found = find_start_record(2, root.path().string(), r.gpus);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->start_ms, r.start_ms);
  EXPECT_EQ(found->measured_at, r.measured_at);
  EXPECT_EQ(found->model, r.model);
  EXPECT_FALSE(find_start_record(2, root.path().string(), std::vector<std::string>{"NVIDIA H100", "NVIDIA H100"}));  // another machine
  EXPECT_FALSE(find_start_record(4, root.path().string(), r.gpus));                                          // another count
}

// The record's keys are the ways auto weighs, typed; its file names them by the bench rows that measure
// them, and the rows auto does not weigh are left out (a record of one GPU from a bench of several names
// its worker's row "fleet (1 device)").
TEST(StartRecord, ItsKeysAreTheWaysAutoWeighsNotRowLabels) {
  const StartRecord r = StartRecord::from_json(R"json({"ortfleet_start_record": 1, "gpus": ["G"], "device_count": 1, "measured_at": "2026-11-23T06:00:00Z",
      "source": "bench", "start_ms": {"fleet (1 device)": 500, "plain (1 device)": 900, "fleet, one process": 450, "sequential": 2100}})json",
                                               "r.json");
  EXPECT_EQ(r.start_ms, (std::map<StartWay, double>{{StartWay::workers, 500}, {StartWay::one_process, 450}}));
  const auto written = nlohmann::json::parse(r.to_json()).at("start_ms");
  EXPECT_EQ(written, nlohmann::json::parse(R"({"fleet": 500, "fleet, one process": 450})"));
  for (const StartWay way : {StartWay::workers, StartWay::one_process, StartWay::threads}) EXPECT_EQ(start_way_of_row(to_string(way)), way);
  EXPECT_EQ(start_way_of_row("fleet, empty cache"), std::nullopt);
}

TEST(StartRecord, AMalformedRecordOrOneInAFolderOthersCanWriteIsNotUsed) {
  EXPECT_THROW(StartRecord::from_json("{\"ortfleet_start_record\": 1, \"gpus\": 3}", "r.json"), Error);
  EXPECT_THROW(StartRecord::from_json("[]", "r.json"), Error);
  const detail::PrivateDir root = detail::PrivateDir::temporary("ortfleet-test-records");
  const StartRecord r = two_h200();
  save_start_record(r, root.path().string());
  { std::ofstream(start_record_path(2, root.path().string())) << "{not json"; }
  EXPECT_FALSE(find_start_record(2, root.path().string(), r.gpus));
  save_start_record(r, root.path().string());
  ASSERT_TRUE(find_start_record(2, root.path().string(), r.gpus));
  fs::permissions(root.path() / "start-records", fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
  EXPECT_FALSE(find_start_record(2, root.path().string(), r.gpus)) << "another user could have planted it";
}

}  // namespace ortfleet
