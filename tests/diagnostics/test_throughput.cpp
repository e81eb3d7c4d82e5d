#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ortfleet/base/error.hpp"
#include "ortfleet/diagnostics/throughput.hpp"
#include "test_support.hpp"

namespace ortfleet {

TEST(Throughput, OverDevicesAndThreads) {
  ThroughputOptions o;
  o.model = test::mlp_model();
  o.devices = {Device::cpu(0), Device::cpu(1)};
  o.seconds = 0.3;
  const ThroughputReport r = run_throughput(o);
  // 1 thread, 2 threads on one session, 2 worker processes, 2 sessions in process; then the round
  // trips: ring, 8 in flight through the ring, socket, in process.
  ASSERT_EQ(r.rows.size(), 8u);
  for (const auto& row : r.rows) {
    EXPECT_GT(row.inferences_per_s, 0.0) << row.label;
    EXPECT_LE(row.p50_ms, row.p99_ms);
  }
  EXPECT_DOUBLE_EQ(r.rows[0].speedup, 1.0);
  EXPECT_EQ(r.rows[2].devices, 2);
  EXPECT_EQ(r.rows[3].devices, 2);
  EXPECT_NE(r.rows[2].label, r.rows[3].label);
  EXPECT_EQ(nlohmann::json::parse(r.to_json())["rows"].size(), 8u);
  EXPECT_EQ(r.rows[4].label, "worker round trip, identity batch 1, request ring");
  EXPECT_EQ(r.rows[6].label, "worker round trip, identity batch 1, socket");
  EXPECT_EQ(r.rows[5].threads, 1);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes.back().find("round trip (identity model, batch 1, cpu"), std::string::npos) << r.notes.back();
}

TEST(Throughput, AShapeMixThroughOneSessionAndThroughShapeAwareSessions) {
  ThroughputOptions o;
  o.model = test::dynamic_mlp_model();
  o.devices = {Device::cpu()};
  o.seconds = 0.3;
  o.shape_mix = {1, 2, 1};
  o.anchors = false;
  const ThroughputReport r = run_throughput(o);
  ASSERT_EQ(r.rows.size(), 4u);  // batch 1 alone, batch 2 alone, one session, shape-aware
  EXPECT_EQ(r.rows[0].label, "same shape, batch 1");
  EXPECT_EQ(r.rows[1].label, "same shape, batch 2");
  EXPECT_EQ(r.rows[2].label, "one session, shape mix 1,2,1");
  EXPECT_EQ(r.rows[3].label, "shape-aware, shape mix 1,2,1");
  EXPECT_EQ(r.rows[2].sessions, 1);  // ONNX Runtime's own behaviour: one session for every shape
  EXPECT_EQ(r.rows[3].sessions, 2);  // one per shape
  for (const auto& row : r.rows) {
    EXPECT_GT(row.inferences_per_s, 0.0) << row.label;
    EXPECT_GT(row.first_call_ms, 0.0) << row.label;
    EXPECT_LE(row.p50_ms, row.p99_ms) << row.label;
  }
  EXPECT_DOUBLE_EQ(r.rows[2].speedup, 1.0);  // compared with the one-session row
  ASSERT_GE(r.notes.size(), 3u);
  EXPECT_NE(r.notes[0].find("shape-aware is"), std::string::npos);
  EXPECT_NE(r.notes[1].find("the same-shape p50 of batch 2"), std::string::npos);
  const auto j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j["rows"].size(), 4u);
  EXPECT_EQ(j["rows"][3]["sessions"], 2);
}

TEST(Throughput, AShapeMixNeedsAModelWithADynamicBatch) {
  ThroughputOptions o;
  o.model = test::mlp_model();  // batch fixed at 1
  o.devices = {Device::cpu()};
  o.seconds = 0.1;
  o.shape_mix = {1, 2};
  o.anchors = false;
  try {
    run_throughput(o);
    FAIL() << "a shape mix on a fixed-batch model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no input of this model has a dynamic first dim"), std::string::npos) << e.what();
  }
}

}  // namespace ortfleet
