#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/synth/synth.hpp"
#include "test_support.hpp"
#include "ortfleet/engine/model_file.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
/// Creates a CPU session, runs one inference on generated inputs and returns the first output.
std::vector<float> run_once(const std::string& model) {
  SessionSpec spec;
  spec.model_path = model;
  Session session(spec);
  auto outputs = session.run(random_inputs(session.inputs(), 1));
  const Tensor& out = outputs.front();
  EXPECT_EQ(out.type, ElementType::float32);
  return {out.values<float>(), out.values<float>() + out.element_count()};
}
}  // namespace

TEST(Synth, SameSeedSameBytesOtherSeedOtherWeights) {
  const auto dir = test::scratch_dir() / "determinism";
  synth::MlpSpec spec;
  synth::WriteOptions a;
  a.seed = 7;
  synth::WriteOptions b;
  b.seed = 8;
  synth::write_mlp((dir / "a1.onnx").string(), spec, a);
  synth::write_mlp((dir / "a2.onnx").string(), spec, a);
  synth::write_mlp((dir / "b.onnx").string(), spec, b);
  EXPECT_EQ(test::read_all((dir / "a1.onnx").string()), test::read_all((dir / "a2.onnx").string()));
  EXPECT_NE(test::read_all((dir / "a1.onnx").string()), test::read_all((dir / "b.onnx").string()));
}

TEST(Synth, MlpRunsOnTheCpuWithFiniteOutputs) {
  const auto out = run_once(test::mlp_model());
  ASSERT_EQ(out.size(), 64u);
  for (float v : out) EXPECT_TRUE(std::isfinite(v));
}

TEST(Synth, ResNet50HasTheRealLayout) {
  const auto s = synth::write_resnet((test::scratch_dir() / "r50.onnx").string(), {});
  EXPECT_EQ(s.kind, "resnet50");
  EXPECT_EQ(s.conv_nodes, 53);  // 1 stem + 16 bottlenecks x 3 + 4 projections
  EXPECT_NEAR(static_cast<double>(s.parameters), 25.6e6, 0.1e6);
  const ModelFacts f = inspect_model(s.path);
  EXPECT_EQ(f.op_counts.at("Conv"), 53);
  EXPECT_EQ(f.op_counts.at("BatchNormalization"), 53);
  EXPECT_EQ(f.initializer_bytes, s.weight_bytes);
}

TEST(Synth, ResNet18RunsOnTheCpu) {
  const auto out = run_once(test::resnet18_model());
  ASSERT_EQ(out.size(), 1000u);
  for (float v : out) ASSERT_TRUE(std::isfinite(v));
}

TEST(Synth, ConvZooHasDistinctShapesAndRuns) {
  synth::ConvZooSpec spec;
  spec.convs = 150;
  spec.max_spatial = 28;
  const auto s = synth::write_conv_zoo((test::scratch_dir() / "zoo150.onnx").string(), spec);
  EXPECT_EQ(s.distinct_convs, 150);
  const ModelFacts facts = inspect_model(s.path);
  EXPECT_EQ(facts.op_counts.at("Conv"), 150);
  EXPECT_GT(facts.inputs.size(), 1u);  // one input per (channels, size) pair
  const auto out = run_once(s.path);
  ASSERT_GT(out.size(), 150u);  // every conv's pooled channels, side by side
  for (float v : out) ASSERT_TRUE(std::isfinite(v));
}

TEST(Synth, TransformerWithExternalDataRuns) {
  const auto out = run_once(test::small_transformer());
  EXPECT_EQ(out.size(), 16u * 64u);
  EXPECT_TRUE(fs::exists(test::small_transformer() + ".data"));
  EXPECT_TRUE(inspect_model(test::small_transformer()).external_data);
}

// The issue's size class: a 24 x 1024 encoder of about 1.27 GB, written and run on the CPU.
TEST(Synth, GigabyteTransformerLoadsAndRunsOnTheCpu) {
  const auto path = (test::scratch_dir() / "transformer-1gb.onnx").string();
  const auto s = synth::write_transformer(path, {});
  EXPECT_GE(s.file_bytes, 1'000'000'000u);
  EXPECT_TRUE(s.external_data_path.empty());  // under 2 GB: one file
  const auto out = run_once(path);
  EXPECT_EQ(out.size(), 128u * 1024u);
  for (size_t i = 0; i < out.size(); i += 997) ASSERT_TRUE(std::isfinite(out[i]));
  fs::remove(path);
}

// Graph size as the knob: whole blocks of 9 nodes, one small weight each, GELU spelt out with Erf.
TEST(Synth, NodeHeavyGraphHasTheNodesAskedForAndRuns) {
  synth::NodeHeavySpec spec;
  spec.nodes = 1000;  // 112 blocks: 1008 nodes
  spec.width = 16;
  const auto s = synth::write_node_heavy((test::scratch_dir() / "nodes1000.onnx").string(), spec);
  EXPECT_EQ(s.kind, "nodes");
  EXPECT_EQ(s.nodes, 1008);
  EXPECT_EQ(s.parameters, 112u * (16u * 16u + 3u * 16u));
  const ModelFacts facts = inspect_model(s.path);
  EXPECT_EQ(facts.op_counts.at("MatMul"), 112);
  EXPECT_EQ(facts.op_counts.at("Erf"), 112);
  EXPECT_EQ(facts.op_counts.at("LayerNormalization"), 112);
  EXPECT_EQ(facts.initializer_bytes, s.weight_bytes + 3 * sizeof(float));  // and the GELU's three constants
  const auto out = run_once(s.path);
  ASSERT_EQ(out.size(), 16u);
  for (float v : out) ASSERT_TRUE(std::isfinite(v));
  // LayerNormalization at the end of every block: outputs neither vanish nor blow up with depth.
  float largest = 0;
  for (float v : out) largest = std::max(largest, std::fabs(v));
  EXPECT_GT(largest, 0.1f);
  EXPECT_LT(largest, 10.0f);
}

TEST(Synth, NodeHeavyDefaultIsTheIssuesSizeClass) {
  const auto s = synth::write_node_heavy((test::scratch_dir() / "nodes24k.onnx").string(), {});
  EXPECT_GE(s.nodes, 24000);
  EXPECT_LT(s.nodes, 24000 + synth::kNodeHeavyBlockNodes);
  EXPECT_NEAR(static_cast<double>(s.weight_bytes), 45.7e6, 1e6);
  fs::remove(s.path);
}

TEST(Synth, RejectsImpossibleShapes) {
  synth::NodeHeavySpec n;
  n.nodes = 3;
  EXPECT_THROW(synth::write_node_heavy((test::scratch_dir() / "bad.onnx").string(), n), Error);
  synth::TransformerSpec t;
  t.hidden = 100;
  t.heads = 3;
  EXPECT_THROW(synth::write_transformer((test::scratch_dir() / "bad.onnx").string(), t), Error);
  synth::ResNetSpec r;
  r.depth = 42;
  EXPECT_THROW(synth::write_resnet((test::scratch_dir() / "bad.onnx").string(), r), Error);
  synth::ConvZooSpec z;
  z.convs = 100000;
  EXPECT_THROW(synth::write_conv_zoo((test::scratch_dir() / "bad.onnx").string(), z), Error);
}

TEST(Synth, DefaultModelIsWrittenOnceAndReused) {
  const auto dir = (test::scratch_dir() / "default").string();
  const std::string first = synth::default_model(dir);
  const auto written = fs::last_write_time(first);
  EXPECT_EQ(synth::default_model(dir), first);
  EXPECT_EQ(fs::last_write_time(first), written);
}

}  // namespace ortfleet

namespace ortfleet {
// `ortfleet start` without a model loads the default model from the cache folder: a model planted in
// a folder another user can write must never be the one it loads.
TEST(Synth, TheDefaultModelComesOnlyFromAFolderOfThisUser) {
  const fs::path open = test::scratch_dir() / "default-model-open";
  fs::create_directories(open);
  fs::copy_file(test::mlp_model(), open / "resnet50-seed1.onnx", fs::copy_options::overwrite_existing);
  fs::permissions(open, fs::perms::all);
  try {
    const std::string loaded = synth::default_model(open.string());
    FAIL() << "the default model came from a world-writable folder: " << loaded;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(open.string() + " can be written by other users"), std::string::npos) << e.what();
  }
}
}  // namespace ortfleet
