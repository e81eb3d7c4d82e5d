#include <gtest/gtest.h>

#include <cmath>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/engine/tensor.hpp"
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
  spec.config.session.model_cache_fill = ModelCacheFill::inline_start;  // what a background fill does
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

// ONNX Runtime said "Unexpected input data type. Actual: (tensor(double)) , expected: (tensor(float))",
// naming no input: the type is checked before it sees the call.
TEST(Session, AWrongElementTypeNamesTheInputAndTheConversion) {
  SessionSpec spec;
  spec.model_path = test::mlp_model();
  Session s(spec);
  const std::vector<double> values(64, 0.0);
  const Error e = test::error_from([&] { s.run({Tensor::host_copy("input", ElementType::float64, {1, 64}, values.data())}); });
  EXPECT_NE(std::string(e.what()).find("input 'input' is float64 (double); the model takes float32 (float)"), std::string::npos) << e.what();
  EXPECT_NE(e.hint().find("numpy's .astype(numpy.float32), torch's .to(torch.float32)"), std::string::npos) << e.hint();
}

// A 33 x 47 image through a net that halves it three times and adds an upsampled map back: ONNX
// Runtime's broadcast error, told with the inputs and the multiple the dims miss.
TEST(Session, SizesTheGraphCannotCombineNameTheInputsAndTheMultipleTheyMiss) {
  SessionSpec spec;
  spec.model_path = test::segmenter_model();
  Session s(spec);
  const auto odd = random_inputs({{"image", ElementType::float32, {1, 3, 33, 47}, {}}}, 1);
  const Error e = test::error_from([&] { s.run(odd); });
  const std::string text = e.what();
  EXPECT_NE(text.find("the model could not take the sizes it was given: "), std::string::npos) << text;
  EXPECT_NE(text.find("inputs: 'image' [1, 3, 33, 47] (the model declares [1, 3, height, width])"), std::string::npos) << text;
  EXPECT_EQ(text.find(".h:"), std::string::npos) << "a source location: " << text;
  EXPECT_NE(e.hint().find("image.2 = 33, image.3 = 47 are not a multiple of 32"), std::string::npos) << e.hint();
  EXPECT_NE(e.hint().find("`shapes.buckets=image.2=64 image.3=64`"), std::string::npos) << e.hint();
  const auto even = random_inputs({{"image", ElementType::float32, {1, 3, 64, 96}, {}}}, 1);
  EXPECT_EQ(s.run(even).size(), 1u);  // multiples of 32 run
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

namespace ortfleet {

namespace {
Tensor mlp_batch(int64_t batch, float offset) {
  std::vector<float> values(static_cast<size_t>(batch * 64));
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i) * 0.37f + offset);
  return Tensor::host_copy("input", ElementType::float32, {batch, 64}, values.data());
}

std::vector<float> values_of(const Tensor& t) {
  const float* p = t.values<float>();
  return std::vector<float>(p, p + t.element_count());
}

SessionSpec dynamic_mlp(int max_sessions) {
  SessionSpec spec;
  spec.model_path = test::dynamic_mlp_model();
  spec.config.shapes.max_sessions = max_sessions;
  spec.config.shapes.policy = ShapePolicy::per_shape;  // the default shares one session on the CPU (test_buckets.cpp)
  return spec;
}
}  // namespace

TEST(ShapeAwareSession, EachShapeGetsAnOnnxRuntimeSessionOfItsOwn) {
  Session s(dynamic_mlp(8));
  for (int round = 0; round < 3; ++round) {
    for (int64_t batch : {1, 2}) s.run({mlp_batch(batch, 0.5f)});
  }
  const auto sessions = s.shape_sessions();
  ASSERT_EQ(sessions.size(), 2u);
  // Each one only ever saw its own shape: three calls each, and no session serves both.
  EXPECT_EQ(sessions[0].shapes, "input=1x64");
  EXPECT_EQ(sessions[0].calls, 3);
  EXPECT_EQ(sessions[1].shapes, "input=2x64");
  EXPECT_EQ(sessions[1].calls, 3);
}

TEST(ShapeAwareSession, OneSessionServesEveryShapeWhenCappedAtOne) {
  Session s(dynamic_mlp(1));
  for (int64_t batch : {1, 2, 3}) EXPECT_EQ(s.run({mlp_batch(batch, 0.1f)}).front().shape.front(), batch);
  EXPECT_EQ(s.shape_sessions().size(), 1u);
}

TEST(ShapeAwareSession, TheLeastRecentlyUsedShapeIsEvictedAtTheCap) {
  Session s(dynamic_mlp(2));
  s.run({mlp_batch(1, 0)});
  s.run({mlp_batch(2, 0)});
  s.run({mlp_batch(1, 0)});  // 2 is now the least recently used
  s.run({mlp_batch(3, 0)});
  const auto sessions = s.shape_sessions();
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(sessions[0].shapes, "input=1x64");
  EXPECT_EQ(sessions[1].shapes, "input=3x64");
  EXPECT_GT(sessions[1].create_ms, 0);
}

TEST(ShapeAwareSession, EveryShapeComputesWhatOneSessionComputes) {
  Session shape_aware(dynamic_mlp(8));
  Session plain(dynamic_mlp(1));
  for (int64_t batch : {3, 1, 2, 3}) {
    const Tensor input = mlp_batch(batch, static_cast<float>(batch));
    EXPECT_EQ(values_of(shape_aware.run({input}).front()), values_of(plain.run({input}).front())) << "batch " << batch;
  }
}

TEST(ShapeAwareSession, DeclaredShapesAreMadeAndWarmedAtStartUp) {
  SessionSpec spec = dynamic_mlp(8);
  spec.config.shapes.batches = {1, 4};
  Session s(spec);
  ASSERT_EQ(s.declared_shapes().size(), 2u);
  s.warm_up(1);
  const auto sessions = s.shape_sessions();
  ASSERT_EQ(sessions.size(), 2u);
  for (const auto& info : sessions) {
    EXPECT_TRUE(info.declared) << info.shapes;
    EXPECT_EQ(info.calls, 1) << info.shapes;
  }
  s.run({mlp_batch(4, 0)});
  EXPECT_EQ(s.shape_sessions().size(), 2u);  // a declared shape needs no new session
}

TEST(ShapeAwareSession, PaddedBatchesGiveTheUnpaddedOutputs) {
  SessionSpec spec = dynamic_mlp(8);
  spec.config.shapes.batches = {4, 8};
  spec.config.shapes.pad_batch = true;
  Session padded(spec);
  Session plain(dynamic_mlp(8));
  for (int64_t batch : {3, 1, 4, 6}) {
    const Tensor input = mlp_batch(batch, 0.25f);
    const auto out = padded.run({input});
    ASSERT_EQ(out.front().shape, (std::vector<int64_t>{batch, 64}));
    const auto expected = values_of(plain.run({input}).front());
    const auto got = values_of(out.front());
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5f) << "batch " << batch << " value " << i;
  }
  // Only the declared batches got sessions: 3 ran as 4, 1 as 4, 6 as 8.
  for (const auto& info : padded.shape_sessions()) EXPECT_TRUE(info.shapes == "input=4x64" || info.shapes == "input=8x64") << info.shapes;
}

TEST(ShapeAwareSession, DeclaringMoreShapesThanTheCapIsAClearError) {
  SessionSpec spec = dynamic_mlp(2);
  spec.config.shapes.batches = {1, 2, 4};
  try {
    Session s(spec);
    FAIL() << "three shapes were accepted with a cap of two";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 input shapes were declared, more than the 2 sessions"), std::string::npos) << e.what();
  }
}

TEST(ShapeAwareSession, AShapeTheModelForbidsNamesTheInput) {
  Session s(dynamic_mlp(8));
  for (const auto& shape : {std::vector<int64_t>{2, 63}, std::vector<int64_t>{2}, std::vector<int64_t>{0, 64}}) {
    try {
      s.run({Tensor::host_copy("input", ElementType::float32, shape, nullptr)});
      FAIL() << "accepted shape " << shape_text(shape);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("input 'input' has"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("the model expects [batch, 64]"), std::string::npos) << e.what();
    }
  }
}

}  // namespace ortfleet

namespace ortfleet {
namespace {
SessionSpec tiered_spec(const std::string& model, const std::string& cache) {
  SessionSpec spec;
  spec.model_path = model;
  spec.cache_dir = cache;
  spec.config.session.optimized_model_cache = true;
  spec.config.session.model_cache_fill = ModelCacheFill::off;
  spec.config.session.tiered_start = TieredStart::on;
  return spec;
}
bool has_event(const Timeline& t, const char* name) {
  for (const auto& e : t.events()) {
    if (e.name == name) return true;
  }
  return false;
}
}  // namespace

// A tiered start serves from the quick session at ready, makes the configured one beside it, and switches
// it in once their outputs agree: the outputs before and after are a plain session's, and the timeline
// shows the full session and the switch.
TEST(SessionTiers, TheFullSessionTakesOverOnceItsOutputsAgree) {
  SessionSpec plain;
  plain.model_path = test::resnet18_model();
  Session reference(plain);
  const auto inputs = random_inputs(reference.inputs(), 3);
  const auto want = first_output(reference, inputs);
  Timeline timeline;
  Session s(tiered_spec(test::resnet18_model(), test::fresh_dir("tiers-switch").string()), &timeline);
  EXPECT_EQ(s.tier().stage, SessionTier::Stage::quick);
  s.warm_up();
  const auto quick = first_output(s, inputs);
  const SessionTier done = s.wait_for_full_session(120);
  ASSERT_EQ(done.stage, SessionTier::Stage::full) << done.note;
  EXPECT_GT(done.full_ms, 0);
  const auto full = first_output(s, inputs);
  ASSERT_EQ(quick.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(quick[i], want[i], 1e-3 * (1 + std::abs(want[i])));
  test::expect_same_values(want, full);
  EXPECT_TRUE(has_event(timeline, phase::session_full));
  EXPECT_TRUE(has_event(timeline, phase::session_switch));
}

// Outputs that differ beyond the tolerance keep the quick session, and say why.
TEST(SessionTiers, AFullSessionThatDisagreesIsNotSwitchedIn) {
  const test::ScopedEnv disagree("ORTFLEET_TEST_TIER_DISAGREE", "1");
  test::CapturedLog log;
  Session s(tiered_spec(test::mlp_model(), test::fresh_dir("tiers-refused").string()));
  s.warm_up();
  const SessionTier done = s.wait_for_full_session(120);
  EXPECT_EQ(done.stage, SessionTier::Stage::refused);
  EXPECT_NE(done.note.find("told to disagree"), std::string::npos) << done.note;
  EXPECT_EQ(log.count("the quick session keeps serving"), 1u);
  EXPECT_NO_THROW(s.run(random_inputs(s.inputs(), 1)));
}

// Off, a cached start, declared shapes: no tier; a Session closed while its full session is made
// ends at once (its first run terminated), nothing left running.
TEST(SessionTiers, OnlyAFirstStartOfOneShapeIsTieredAndClosingOneStopsItsFullSession) {
  const std::string cache = test::fresh_dir("tiers-when").string();
  SessionSpec off = tiered_spec(test::mlp_model(), cache);
  off.config.session.tiered_start = TieredStart::off;
  EXPECT_EQ(Session(off).tier().stage, SessionTier::Stage::none);
  SessionSpec declared = tiered_spec(test::dynamic_mlp_model(), cache);
  declared.config.shapes.batches = {1, 2};
  EXPECT_EQ(Session(declared).tier().stage, SessionTier::Stage::none);
  SessionSpec automatic = tiered_spec(test::mlp_model(), cache);
  automatic.config.session.tiered_start = TieredStart::automatic;  // automatic is for a GPU's convolutions
  EXPECT_EQ(Session(automatic).tier().stage, SessionTier::Stage::none);
  {
    Session closing(tiered_spec(test::resnet18_model(), cache));
    closing.warm_up();
  }  // destroyed while its full session may be in the making: must not hang or crash
}

}  // namespace ortfleet
