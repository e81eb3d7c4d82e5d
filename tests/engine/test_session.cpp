#include <gtest/gtest.h>

#include <cmath>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "test_support.hpp"

namespace ortfleet {

namespace {
std::vector<float> first_output(Session& s, const std::vector<Tensor>& inputs) {
  const auto out = s.run(inputs);
  return {out.front().values<float>(), out.front().values<float>() + out.front().element_count()};
}
}  // namespace

TEST(Session, ReportsInputsOutputsAndProvider) {
  SessionSpec spec;
  spec.model_path = test::resnet18_model();
  Timeline timeline;
  Session s(spec, &timeline);
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].name, "input");
  EXPECT_EQ(s.inputs()[0].shape, (std::vector<int64_t>{1, 3, 64, 64}));
  EXPECT_EQ(s.outputs()[0].shape, (std::vector<int64_t>{1, 1000}));
  EXPECT_EQ(s.provider().path, "cpu");
  EXPECT_GT(timeline.phase_totals_ms("cpu").at(phase::session_create), 0.0);
}

TEST(Session, SameInputsSameOutputsAcrossSessionsAndLoadPaths) {
  SessionSpec plain;
  plain.model_path = test::resnet18_model();
  Session a(plain);
  SessionSpec mapped = plain;
  mapped.map_model = true;
  Session b(mapped);
  const auto inputs = random_inputs(a.inputs(), 3);
  const auto x = first_output(a, inputs);
  const auto y = first_output(b, inputs);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(x[i], y[i]);
}

TEST(Session, ModelCacheHitGivesTheSameResults) {
  SessionSpec spec;
  spec.model_path = test::resnet18_model();
  spec.cache_dir = (test::scratch_dir() / "session-cache").string();
  spec.config.session.optimized_model_cache = true;
  Session miss(spec);
  EXPECT_FALSE(miss.used_model_cache());
  Session hit(spec);
  EXPECT_TRUE(hit.used_model_cache());
  SessionSpec reference;
  reference.model_path = test::resnet18_model();
  Session plain(reference);
  const auto inputs = random_inputs(plain.inputs(), 9);
  const auto want = first_output(plain, inputs);
  const auto got = first_output(hit, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], got[i], 1e-4f * (1 + std::abs(want[i])));
}

TEST(Session, WarmUpRecordsEachRun) {
  SessionSpec spec;
  spec.model_path = test::mlp_model();
  Timeline timeline;
  Session s(spec, &timeline);
  s.warm_up(3);
  int runs = 0;
  for (const auto& e : timeline.events()) runs += e.name == phase::warmup ? 1 : 0;
  EXPECT_EQ(runs, 3);
}

TEST(Session, SessionOptionsAreApplied) {
  SessionSpec spec;
  spec.model_path = test::mlp_model();
  spec.config.session.graph_optimization = GraphOptimization::disabled;
  spec.config.session.intra_op_threads = 1;
  spec.config.session.thread_spinning = false;
  spec.config.session.memory_pattern = false;
  spec.config.session.cpu_arena = false;
  Session s(spec);
  EXPECT_EQ(s.run(random_inputs(s.inputs(), 1)).size(), 1u);
}

TEST(Session, BadInputsFailClearly) {
  SessionSpec spec;
  spec.model_path = test::mlp_model();
  Session s(spec);
  auto inputs = random_inputs(s.inputs(), 1);
  inputs[0].device = Device::cuda(0);
  EXPECT_THROW(s.run(inputs), Error);
  std::vector<Tensor> wrong = {Tensor::host_copy("input", ElementType::float32, {1, 3}, nullptr)};
  try {
    s.run(wrong);
    FAIL() << "a wrong shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("running"), std::string::npos) << e.what();
  }
}

TEST(Session, ProfilingWritesOnnxRuntimesProfile) {
  SessionSpec spec;
  spec.model_path = test::mlp_model();
  spec.profile_prefix = (test::scratch_dir() / "session-profile").string();
  Session s(spec);
  s.warm_up(2);
  const std::string path = s.end_profiling();
  EXPECT_TRUE(std::filesystem::exists(path)) << path;
}

}  // namespace ortfleet
