// Buckets (engine/buckets.hpp), padding (engine/tensor_padding.hpp) and the measured shape policy
// (engine/shape_policy.hpp), alone and through a Session on the CPU.
#include <gtest/gtest.h>

#include <cstring>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/shapes/buckets.hpp"
#include "engine/shapes/shape_policy.hpp"
#include "engine/shapes/shapes.hpp"
#include "engine/session/tensor_padding.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/synth/synth.hpp"
#include "synth/graph_builder.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {

Tensor counting(const std::vector<int64_t>& shape, const char* name = "x") {
  Tensor t = Tensor::host_copy(name, ElementType::float32, shape, nullptr);
  for (int64_t i = 0; i < t.element_count(); ++i) t.values<float>()[i] = static_cast<float>(i);
  return t;
}

float at(const Tensor& t, const std::vector<int64_t>& index) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset = offset * t.shape[d] + index[d];
  return t.values<float>()[offset];
}

std::string expect_error(const std::function<void()>& f) { return test::error_from(f).what(); }

Tensor tokens(const char* name, int64_t length, int64_t value_or_seed, bool constant) {
  Tensor t = Tensor::host_copy(name, ElementType::int64, {1, length}, nullptr);
  for (int64_t i = 0; i < length; ++i) t.values<int64_t>()[i] = constant ? value_or_seed : (i * 7 + value_or_seed) % 100;
  return t;
}

// Issue 58's re-audit (W1): models whose outputs read the padded positions only through a min or a
// max over them, which made-up inputs in [-1, 1] padded with 0 never show (0 is neither).
// (x - min) / (max - min + eps) over H and W of x [1, 3, height, width]: an image's min-max scaling.
const std::string& min_max_scaling_model() {
  static const std::string path = [] {
    using onnx::Attribute;
    synth::GraphBuilder g("minmax", 1);
    g.input("x", onnx::DataType::float32, {1, 3, "height", "width"});
    const std::vector<Attribute> over_image = {Attribute::Ints("axes", {2, 3}), Attribute::Int("keepdims", 1)};
    const std::string lo = g.op("ReduceMin", {"x"}, over_image);
    const std::string hi = g.op("ReduceMax", {"x"}, over_image);
    const std::string y = g.op("Div", {g.op("Sub", {"x", lo}), g.op("Add", {g.op("Sub", {hi, lo}), g.scalar("eps", 1e-6f)})});
    g.output(y, onnx::DataType::float32, {1, 3, "height", "width"});
    return g.write((test::scratch_dir() / "minmax.onnx").string(), "minmax", synth::WriteOptions{}).path;
  }();
  return path;
}

// x - max over `axis` of x [1, sequence, 8] (a log-softmax's first step): over the sequence (1), or
// over the fixed last dim (2), which no padding of the sequence reaches.
std::string minus_max_model(int64_t axis) {
  using onnx::Attribute;
  synth::GraphBuilder g("minusmax", 1);
  g.input("x", onnx::DataType::float32, {1, "sequence", 8});
  const std::string y = g.op("Sub", {"x", g.op("ReduceMax", {"x"}, {Attribute::Ints("axes", {axis}), Attribute::Int("keepdims", 1)})});
  g.output(y, onnx::DataType::float32, {1, "sequence", 8});
  return g.write((test::scratch_dir() / ("minusmax-" + std::to_string(axis) + ".onnx")).string(), "minusmax", synth::WriteOptions{}).path;
}

// Values from lo to hi in a fixed order (no two neighbours alike).
Tensor spread(const std::vector<int64_t>& shape, float lo, float hi) {
  Tensor t = Tensor::host_copy("x", ElementType::float32, shape, nullptr);
  for (int64_t i = 0; i < t.element_count(); ++i) t.values<float>()[i] = lo + (hi - lo) * static_cast<float>((i * 37) % 101) / 100.0f;
  return t;
}

// The largest difference between a call of `x` and the same call padded to `bucket` (with `pad`) and
// cropped back, on one unbucketed session: what buckets would do to it unchecked.
float padding_moves(Session& plain, const Tensor& x, const std::vector<int64_t>& bucket, double pad) {
  const Tensor want = plain.run({x})[0];
  const Tensor got = detail::cropped(plain.run({detail::padded(x, bucket, pad, Device::cpu())})[0], want.shape, Device::cpu());
  float largest = 0;
  for (int64_t i = 0; i < want.element_count(); ++i) largest = std::max(largest, std::abs(want.values<float>()[i] - got.values<float>()[i]));
  return largest;
}

}  // namespace

TEST(TensorPadding, PadsAnyDimsWithTheValueAndCropsBack) {
  const Tensor x = counting({2, 3, 4});
  const Tensor p = detail::padded(x, {2, 5, 6}, -1.0, Device::cpu());
  ASSERT_EQ(p.shape, (std::vector<int64_t>{2, 5, 6}));
  for (int64_t a = 0; a < 2; ++a) {
    for (int64_t b = 0; b < 5; ++b) {
      for (int64_t c = 0; c < 6; ++c) {
        const float want = b < 3 && c < 4 ? at(x, {a, b, c}) : -1.0f;
        ASSERT_EQ(at(p, {a, b, c}), want) << a << "," << b << "," << c;
      }
    }
  }
  const Tensor back = detail::cropped(p, {2, 3, 4}, Device::cpu());
  ASSERT_EQ(back.shape, x.shape);
  for (int64_t i = 0; i < x.element_count(); ++i) EXPECT_EQ(back.values<float>()[i], x.values<float>()[i]);
  // Integers take the value as they are: a pad token id.
  Tensor ids = Tensor::host_copy("ids", ElementType::int64, {1, 2}, nullptr);
  ids.values<int64_t>()[0] = 5;
  ids.values<int64_t>()[1] = 6;
  const Tensor padded_ids = detail::padded(ids, {1, 4}, 3, Device::cpu());
  EXPECT_EQ(std::vector<int64_t>(padded_ids.values<int64_t>(), padded_ids.values<int64_t>() + 4), (std::vector<int64_t>{5, 6, 3, 3}));
}

TEST(TensorPadding, CropIntoAKeptBufferEqualsACroppedCopy) {
  const Tensor t = counting({1, 2, 5, 7}, "x");
  Tensor kept = Tensor::host_allocate("x", ElementType::float32, {1, 2, 3, 4});
  detail::crop_into(t, kept);
  const Tensor want = detail::cropped(t, {1, 2, 3, 4}, Device::cpu());
  ASSERT_EQ(kept.bytes, want.bytes);
  EXPECT_EQ(std::memcmp(kept.data, want.data, want.bytes), 0);
  Tensor other_type = Tensor::host_allocate("x", ElementType::int32, {1, 2, 3, 4});
  EXPECT_THROW(detail::crop_into(t, other_type), Error);
}

TEST(TensorPadding, CopiesWholeRowsNotElements) {
  // An image padded in height and width: one 2-D copy per channel, rows of the real width.
  const auto copies = detail::block_copies({1, 3, 480, 500}, {1, 3, 512, 512}, 4);
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies[1].height, 480u);
  EXPECT_EQ(copies[1].width, 2000u);
  EXPECT_EQ(copies[1].from_pitch, 2000u);
  EXPECT_EQ(copies[1].to_pitch, 2048u);
  EXPECT_EQ(copies[1].from_offset, 480u * 2000u);
  EXPECT_EQ(copies[1].to_offset, 512u * 2048u);
  // A padded sequence: one copy.
  EXPECT_EQ(detail::block_copies({1, 37}, {1, 64}, 8).size(), 1u);
  // Only the width padded: every row of every channel and image in one copy.
  const auto wide = detail::block_copies({8, 256, 60, 60}, {8, 256, 60, 64}, 4);
  ASSERT_EQ(wide.size(), 1u);
  EXPECT_EQ(wide[0].height, 8u * 256u * 60u);
  EXPECT_EQ(wide[0].to_pitch, 256u);
  // Every dim pattern moves the same elements as an element-by-element copy.
  for (const auto& [from, to] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{3}, {5}}, {{2, 3}, {4, 3}}, {{2, 3, 4}, {2, 5, 4}}, {{2, 3, 4}, {3, 3, 6}}, {{1, 2, 3, 4}, {1, 2, 3, 4}}, {{2, 0, 3}, {2, 2, 3}}}) {
    const Tensor x = counting(from);
    const Tensor p = detail::padded(x, to, -1.0, Device::cpu());
    int64_t checked = 0;
    for (int64_t i = 0; i < x.element_count(); ++i) {
      std::vector<int64_t> index(from.size());
      for (int64_t rest = i, d = static_cast<int64_t>(from.size()) - 1; d >= 0; --d) {
        index[static_cast<size_t>(d)] = rest % from[static_cast<size_t>(d)];
        rest /= from[static_cast<size_t>(d)];
      }
      ASSERT_EQ(at(p, index), x.values<float>()[i]) << shape_text(from) << " -> " << shape_text(to);
      ++checked;
    }
    EXPECT_EQ(checked, x.element_count());
  }
}

TEST(Buckets, ParsesListsAndRanges) {
  EXPECT_EQ(parse_buckets("x.2=640,480,960").sizes, (std::vector<int64_t>{480, 640, 960}));
  const auto range = parse_buckets("image.3=320:960:128");
  EXPECT_EQ(range.input, "image");
  EXPECT_EQ(range.dim, 3);
  EXPECT_EQ(range.sizes, (std::vector<int64_t>{320, 448, 576, 704, 832, 960}));
  EXPECT_EQ(parse_buckets("a.b.1=300:1000:128").sizes.back(), 1000);  // a last step short of the end adds it
  EXPECT_EQ(parse_buckets("a.b.1=300:1000:128").input, "a.b");
  for (const char* bad : {"x=1", "x.a=1", "x.2=0", "x.2=9:1:1", "x.2=1:2", ".2=4", "x.2="}) {
    EXPECT_NE(expect_error([&] { parse_buckets(bad); }).find("x"), std::string::npos) << bad;
  }
  EXPECT_EQ(parse_pad_value("input_ids=1").second, 1.0);
  EXPECT_THROW(parse_pad_value("input_ids=one"), Error);
  EXPECT_EQ(parse_shape_policy("per-shape"), ShapePolicy::per_shape);
  EXPECT_THROW(parse_shape_policy("always"), Error);
}

TEST(Buckets, AFittingCallRunsPaddedOnTheBucketsSessionAndItsOutputsAreCroppedBack) {
  SessionSpec spec;
  spec.model_path = test::segmenter_model();
  spec.config.shapes.buckets = {parse_buckets("image.2=32,64"), parse_buckets("image.3=32,64")};
  Session s(spec);
  ASSERT_EQ(s.declared_shapes().size(), 4u);  // the cross product, made at start-up
  s.warm_up(1);
  EXPECT_EQ(s.shape_sessions().size(), 4u);
  for (const auto& [h, w] : {std::pair<int64_t, int64_t>{24, 40}, {64, 8}, {32, 32}, {56, 16}}) {
    const auto out = s.run({counting({1, 3, h, w}, "image")});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, (std::vector<int64_t>{1, 1, h / 4, w / 4})) << h << "x" << w;
  }
  EXPECT_EQ(s.shape_sessions().size(), 4u);  // no session was made for a padded shape
  // Where those calls' time went: three were padded (32x32 is a bucket shape, run as it is).
  const BucketCallCosts costs = s.bucket_calls();
  EXPECT_EQ(costs.calls, 3);
  EXPECT_GT(costs.run_ms, 0);
  EXPECT_GE(costs.pad_ms, 0);
  EXPECT_GE(costs.crop_ms, 0);
  EXPECT_GT(costs.slowest.run_ms, 0);
  EXPECT_LE(costs.slowest.run_ms, costs.run_ms) << "the slowest call's run is one of the three summed";
  EXPECT_LE(costs.slowest.pad_ms, costs.pad_ms);
  EXPECT_LE(costs.slowest.crop_ms, costs.crop_ms);
  // The slowest call, whole: one of the two bucket shapes the three ran as, and one of the three.
  const BucketCallTime& slowest = costs.slowest;
  EXPECT_TRUE(slowest.bucket == "image=1x3x32x64" || slowest.bucket == "image=1x3x64x32") << slowest.bucket;
  EXPECT_LE(slowest.total_ms(), costs.pad_ms + costs.run_ms + costs.crop_ms);
  EXPECT_GE(slowest.total_ms() * 3, costs.pad_ms + costs.run_ms + costs.crop_ms) << "the slowest of three is at least their mean";
  EXPECT_EQ(slowest.total_ms(), slowest.pad_ms + slowest.run_ms + slowest.crop_ms);
  EXPECT_EQ(costs.upload_ms, 0) << "nothing crosses a bus on the CPU";
  if (slowest.bucket == "image=1x3x32x64") {
    EXPECT_TRUE(slowest.bucket_first) << "the only call padded to 32x64";
  }
  // Larger than every bucket: runs as it is, in the shared session.
  EXPECT_EQ(s.run({counting({1, 3, 72, 8}, "image")})[0].shape, (std::vector<int64_t>{1, 1, 18, 2}));
}

// Learning runs the smallest bucket shapes only; the outputs at the largest (what the buffers of padded
// calls are made for) follow from them, and a call's outputs are cropped from its bucket's.
TEST(Buckets, OutputsFollowTheLearnedDimsUpToTheLargestBucketAndDownToACall) {
  TensorSpec image;
  image.name = "image";
  image.type = ElementType::float32;
  image.shape = {1, 3, -1, -1};
  ShapeOptions options;
  options.buckets = {parse_buckets("image.2=32,64,96"), parse_buckets("image.3=32,64")};
  detail::BucketPlan plan({image}, options, {});
  TensorSpec scores{"scores", ElementType::float32, {1, 21, -1, -1}, {}};
  TensorSpec mask{"mask", ElementType::float32, {1, 1, -1, -1}, {}};
  const auto shapes = plan.shapes({image}, 1, 16);
  ASSERT_EQ(shapes.size(), 6u);
  std::vector<InputShapes> ran;
  plan.learn(shapes, {scores, mask}, [&](const InputShapes& shape) {
    ran.push_back(shape);
    const auto& dims = shape.at("image");
    // A segmenter's full-size scores, and a mask at a quarter, strided (covering the image rounded up).
    return std::vector<std::vector<int64_t>>{{1, 21, dims[2], dims[3]}, {1, 1, (dims[2] + 3) / 4, (dims[3] + 3) / 4}};
  });
  for (const auto& shape : ran) EXPECT_LE(shape.at("image")[2], 64) << "learning runs the two smallest sizes of a dim";
  const InputShapes small{{"image", {1, 3, 32, 32}}};
  const std::vector<std::vector<int64_t>> at_small{{1, 21, 32, 32}, {1, 1, 8, 8}};
  const InputShapes largest{{"image", {1, 3, 96, 64}}};
  EXPECT_EQ(plan.output_shapes_at(largest, small, at_small), (std::vector<std::vector<int64_t>>{{1, 21, 96, 64}, {1, 1, 24, 16}}));
  EXPECT_EQ(plan.output_shapes_at(small, small, at_small), at_small);
  // Cropping never grows: a call of 70x50 padded to 96x64, and the same call "cropped" from 32x32.
  const std::vector<std::vector<int64_t>> at_largest{{1, 21, 96, 64}, {1, 1, 24, 16}};
  const InputShapes call{{"image", {1, 3, 70, 50}}};
  EXPECT_EQ(plan.cropped_shapes(call, largest, at_largest), (std::vector<std::vector<int64_t>>{{1, 21, 70, 50}, {1, 1, 18, 13}}));
  EXPECT_EQ(plan.cropped_shapes(call, small, at_small), at_small);
}

// A call past the largest bucket runs unpadded; where the model refuses that size (the segmenter's
// decoder adds feature maps of sizes that differ unless the image is a multiple of 8), its error
// says which dim passed which bucket, and the bucket to add, instead of ONNX Runtime's broadcast error alone.
TEST(Buckets, ACallPastTheLargestBucketThatFailsSaysWhichDimAndWhatToAdd) {
  SessionSpec spec;
  spec.model_path = test::segmenter_model();
  spec.config.shapes.buckets = {parse_buckets("image.2=32,64"), parse_buckets("image.3=32,64")};
  Session s(spec);
  s.warm_up(1);
  const std::string error = expect_error([&] { s.run({counting({1, 3, 76, 8}, "image")}); });
  EXPECT_NE(error.find("(it ran unpadded: image.2 is 76, past its largest bucket 64)"), std::string::npos) << error;
  EXPECT_NE(error.find("Add 96 (a multiple of 32, as every size of it is): `shapes.buckets=image.2=...,96`"), std::string::npos) << error;
  const detail::BucketPlan plan(s.inputs(), spec.config.shapes, {});
  EXPECT_FALSE(plan.overflow({{"image", {1, 3, 64, 40}}}).has_value());
  const auto both = plan.overflow({{"image", {1, 3, 100, 65}}});
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->what, "image.2 is 100, past its largest bucket 64; image.3 is 65, past its largest bucket 64");
}

TEST(Buckets, PaddedTokensWithAZeroMaskGiveTheUnpaddedOutputs) {
  // A transformer: input_ids padded with a pad id, attention_mask (same symbolic dim) with zeros.
  SessionSpec spec;
  spec.model_path = test::masked_transformer_model();
  spec.config.shapes.buckets = {parse_buckets("input_ids.1=16,32,64")};
  spec.config.shapes.pad_values["input_ids"] = 1;
  Session padded(spec);
  padded.warm_up(1);
  SessionSpec plain_spec;
  plain_spec.model_path = test::masked_transformer_model();
  Session plain(plain_spec);
  for (const int64_t length : {5, 16, 29, 40}) {
    const std::vector<Tensor> in = {tokens("input_ids", length, length, false), tokens("attention_mask", length, 1, true)};
    const auto got = padded.run(in);
    const auto want = plain.run(in);
    ASSERT_EQ(got[0].shape, want[0].shape) << length;
    for (int64_t i = 0; i < want[0].element_count(); ++i) {
      ASSERT_NEAR(got[0].values<float>()[i], want[0].values<float>()[i], 1e-4f) << "length " << length << " value " << i;
    }
  }
  EXPECT_EQ(padded.shape_sessions().size(), 3u);
}

// Issue 58: an attention block without a mask gave max |diff| 0.45 against numpy with buckets, every
// value changed (the padded keys enter each softmax row), and the check that an output follows the
// padded dim passed it. A padded call is now checked at start-up against the same call unpadded.
TEST(Buckets, PaddingThatChangesTheOutputsIsRefusedAtStartUpNamingTheOutputAndTheDifference) {
  SessionSpec plain_spec;
  plain_spec.model_path = test::attention_model();
  Session plain(plain_spec);
  const std::string output = plain.outputs().front().name;
  // What padding does to this model, seen without ortfleet's check: 7 tokens padded to 16, cropped back.
  Tensor x = Tensor::host_copy("x", ElementType::float32, {1, 7, 64}, nullptr);
  for (int64_t i = 0; i < x.element_count(); ++i) x.values<float>()[i] = std::sin(0.37f * static_cast<float>(i));
  const Tensor want = plain.run({x})[0];
  const Tensor got = detail::cropped(plain.run({detail::padded(x, {1, 16, 64}, 0.0, Device::cpu())})[0], want.shape, Device::cpu());
  float largest = 0;
  for (int64_t i = 0; i < want.element_count(); ++i) largest = std::max(largest, std::abs(want.values<float>()[i] - got.values<float>()[i]));
  ASSERT_GT(largest, 0.05f) << "the model must be one whose outputs padding changes";

  SessionSpec spec = plain_spec;
  spec.config.shapes.buckets = {parse_buckets("x.1=16,32,64")};
  const std::string why = expect_error([&] {
    Session s(spec);
    s.warm_up(1);
  });
  EXPECT_NE(why.find("buckets for x.1 refused: padding changes the model's outputs: a call of x.1 = 16 padded to 32 and cropped back gives '" + output +
                     "' max |diff| "),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("attention without a mask"), std::string::npos) << why;
  EXPECT_TRUE(refuses_buckets(why)) << why;
  // What advice a stream past its sessions gets from now on in this process: no buckets for it.
  const auto refused = detail::padding_refusal(test::attention_model());
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->find("x.1 = 16 padded to 32: '" + output + "' max |diff| "), std::string::npos) << *refused;
  EXPECT_FALSE(refuses_buckets("warm-up failed: buckets for x.1 are too many"));
}

// Buckets whose padding keeps the outputs (a convolutional net whose border moves less than two
// devices' runs may differ, a masked transformer) pass the check: one padded call per dim, from its
// smallest size to its second.
TEST(Buckets, EachPaddedDimIsCheckedFromItsSmallestSizePaddedToItsSecond) {
  TensorSpec image{"image", ElementType::float32, {-1, 3, -1, -1}, {}};
  ShapeOptions options;
  options.buckets = {parse_buckets("image.2=32,64,96"), parse_buckets("image.3=48")};
  const detail::BucketPlan plan({image}, options, {});
  const InputShapes base{{"image", {1, 3, 32, 48}}};
  const auto probes = plan.padding_probes(base);
  ASSERT_EQ(probes.size(), 2u);
  EXPECT_EQ(probes[0].real, base);
  EXPECT_EQ(probes[0].bucket, (InputShapes{{"image", {1, 3, 64, 48}}}));
  EXPECT_EQ(probes[1].real, (InputShapes{{"image", {1, 3, 32, 32}}}));  // one size: the smaller one learning runs, padded to it
  EXPECT_EQ(probes[1].bucket, base);
  options.buckets = {parse_buckets("image.0=1")};  // a single size of 1 pads nothing
  EXPECT_TRUE(detail::BucketPlan({image}, options, {}).padding_probes({{"image", {1, 3, 32, 48}}}).empty());

  SessionSpec spec;
  spec.model_path = test::segmenter_model();
  spec.config.shapes.buckets = {parse_buckets("image.2=32,64"), parse_buckets("image.3=32,64")};
  Session s(spec);
  EXPECT_NO_THROW(s.warm_up(1));
}

// Issue 58's re-audit (W1): made-up inputs in [-1, 1] padded with 0 passed min-max scaling and x - max
// over a sequence (0 is never the min nor the max), and an image in [10, 255] or log-probabilities then
// came out other. Each padded dim is probed again with every real-valued input above its pad value and
// with every one below it; token ids keep their values (a shifted id would leave the vocabulary).
TEST(Buckets, OneSidedProbesPutEachRealValuedInputWhollyAboveOrBelowItsPadValue) {
  const TensorSpec x{"x", ElementType::float32, {1, -1, 8}, {}};
  const TensorSpec half{"h", ElementType::float16, {1, -1}, {}};
  const TensorSpec ids{"input_ids", ElementType::int64, {1, -1}, {}};
  // Made-up values ([-1, 1]) padded with 0: the half of the range beyond 0 on each side.
  auto sides = detail::one_sided_inputs({x, half, ids}, {}, {});
  ASSERT_EQ(sides.size(), 2u);
  EXPECT_TRUE(sides[0].above);
  EXPECT_EQ(sides[0].ranges, (std::map<std::string, ValueRange>{{"x", {0.5, 1}}, {"h", {0.5, 1}}}));
  EXPECT_FALSE(sides[1].above);
  EXPECT_EQ(sides[1].ranges, (std::map<std::string, ValueRange>{{"x", {-1, -0.5}}, {"h", {-1, -0.5}}}));
  EXPECT_EQ(sides[1].text({}),
            "every real-valued input below what it is padded with ('h' in [-1, -0.5], padded with 0; 'x' in [-1, -0.5], padded with 0)");
  // An image's range starts at its pad value: nothing lies below it, the upper half above it.
  sides = detail::one_sided_inputs({x}, {{"x", {0, 255}}}, {});
  ASSERT_EQ(sides.size(), 1u);
  EXPECT_TRUE(sides[0].above);
  EXPECT_EQ(sides[0].ranges.at("x"), (ValueRange{127.5, 255}));
  // A pad value inside the range splits it there.
  sides = detail::one_sided_inputs({x}, {{"x", {0, 1}}}, {{"x", 0.5}});
  ASSERT_EQ(sides.size(), 2u);
  EXPECT_EQ(sides[0].ranges.at("x"), (ValueRange{0.75, 1}));
  EXPECT_EQ(sides[1].ranges.at("x"), (ValueRange{0, 0.25}));
  // Every value on one side of the pad value already (an image in [10, 255], a pad of -1e4): the
  // plain probe is one-sided; integers are never shifted.
  EXPECT_TRUE(detail::one_sided_inputs({x}, {{"x", {10, 255}}}, {}).empty());
  EXPECT_TRUE(detail::one_sided_inputs({x}, {}, {{"x", -1e4}}).empty());
  EXPECT_TRUE(detail::one_sided_inputs({ids}, {{"input_ids", {0, 30521}}}, {}).empty());
}

TEST(Buckets, AnOutputReadingThePaddedPositionsThroughAMinOrMaxIsRefusedWhateverTheInputsSign) {
  {
    // Min-max scaling over H and W: an image of 40 x 50 in [10, 255] padded to 64 x 64 with 0 takes
    // its min from the padding; inputs in [-1, 1] hide it (0 is neither their min nor their max).
    SessionSpec plain_spec;
    plain_spec.model_path = min_max_scaling_model();
    Session plain(plain_spec);
    ASSERT_GT(padding_moves(plain, spread({1, 3, 40, 50}, 10, 255), {1, 3, 64, 64}, 0.0), 0.02f) << "padding must change an image's outputs";
    ASSERT_LT(padding_moves(plain, spread({1, 3, 40, 50}, -1, 1), {1, 3, 64, 64}, 0.0), 1e-6f) << "and not those of inputs in [-1, 1]";
    SessionSpec spec = plain_spec;
    spec.config.shapes.buckets = {parse_buckets("x.2=32,64"), parse_buckets("x.3=32,64")};
    std::string why = expect_error([&] { Session(spec).warm_up(1); });
    EXPECT_NE(why.find("buckets for x.2 refused: padding changes the model's outputs: a call of x.2 = 32 padded to 64 and cropped back gives '"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("against the same call unpadded, with every real-valued input above what it is padded with ('x' in [0.5, 1], padded with 0)"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("a min or max"), std::string::npos) << why;
    EXPECT_TRUE(refuses_buckets(why)) << why;
    // The image's own range given: the probe takes its upper half.
    spec.config.warmup.input_ranges["x"] = {0, 255};
    why = expect_error([&] { Session(spec).warm_up(1); });
    EXPECT_NE(why.find("with every real-valued input above what it is padded with ('x' in [127.5, 255], padded with 0)"), std::string::npos) << why;
  }
  {
    // x - max over the sequence: log-probabilities (all below 0) of 20 steps padded to 32 take their
    // max from the padding.
    SessionSpec plain_spec;
    plain_spec.model_path = minus_max_model(1);
    Session plain(plain_spec);
    ASSERT_GT(padding_moves(plain, spread({1, 20, 8}, -9, -0.1f), {1, 32, 8}, 0.0), 0.05f) << "padding must change log-probabilities' outputs";
    SessionSpec spec = plain_spec;
    spec.config.shapes.buckets = {parse_buckets("x.1=16,32,64")};
    const std::string why = expect_error([&] { Session(spec).warm_up(1); });
    EXPECT_NE(why.find("buckets for x.1 refused: padding changes the model's outputs: a call of x.1 = 16 padded to 32 and cropped back gives '"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("with every real-valued input below what it is padded with ('x' in [-1, -0.5], padded with 0)"), std::string::npos) << why;
    EXPECT_NE(why.find("give the range they lie in ("), std::string::npos) << why;
    const auto refused = detail::padding_refusal(spec.model_path);
    ASSERT_TRUE(refused);
    EXPECT_NE(refused->find("x.1 = 16 padded to 32, with every real-valued input below"), std::string::npos) << *refused;
    // Inputs declared never below 0 (the pad value) leave the max to the real positions: kept, and a
    // call of such inputs gives the unpadded outputs.
    spec.config.warmup.input_ranges["x"] = {0, 1};
    Session bucketed(spec);
    ASSERT_NO_THROW(bucketed.warm_up(1));
    const Tensor x = spread({1, 20, 8}, 0, 1);
    const Tensor got = bucketed.run({x})[0];
    const Tensor want = plain.run({x})[0];
    ASSERT_EQ(got.shape, want.shape);
    for (int64_t i = 0; i < want.element_count(); ++i) ASSERT_NEAR(got.values<float>()[i], want.values<float>()[i], 1e-6f) << "value " << i;
  }
}

// The one-sided probes refuse no padding that no min or max reads: x - max over a fixed dim, and
// x - max over the sequence padded with a value below any input (what keeps its max), keep their
// buckets and give the unpadded outputs on inputs of either sign.
TEST(Buckets, PaddingThatNoMinOrMaxReadsKeepsItsBucketsOnInputsOfEitherSign) {
  SessionSpec over_fixed;
  over_fixed.model_path = minus_max_model(2);
  over_fixed.config.shapes.buckets = {parse_buckets("x.1=16,32,64")};
  SessionSpec padded_low;
  padded_low.model_path = minus_max_model(1);
  padded_low.config.shapes.buckets = {parse_buckets("x.1=16,32,64")};
  padded_low.config.shapes.pad_values["x"] = -1e4;
  for (const SessionSpec* spec : {&over_fixed, &padded_low}) {
    Session bucketed(*spec);
    ASSERT_NO_THROW(bucketed.warm_up(1)) << spec->model_path;
    SessionSpec plain_spec;
    plain_spec.model_path = spec->model_path;
    Session plain(plain_spec);
    for (const auto& [lo, hi] : {std::pair<float, float>{-9, -0.1f}, {10, 255}, {-1, 1}}) {
      const Tensor x = spread({1, 20, 8}, lo, hi);
      const Tensor got = bucketed.run({x})[0];
      const Tensor want = plain.run({x})[0];
      ASSERT_EQ(got.shape, want.shape);
      for (int64_t i = 0; i < want.element_count(); ++i) {
        ASSERT_NEAR(got.values<float>()[i], want.values<float>()[i], 1e-5f)
            << spec->model_path << " inputs in [" << lo << ", " << hi << "] value " << i;
      }
    }
  }
}

TEST(ShapePolicy, NoBucketsAreAdvisedForAModelWhosePaddingChangesItsOutputs) {
  detail::ShapeTraffic traffic;
  for (int64_t i = 0; i < 10; ++i) traffic.note("x=1x" + std::to_string(8 + 8 * i) + "x64", {{"x", {1, 8 + 8 * i, 64}}});
  const auto advice = traffic.advice_once(9, std::string("x.1 = 8 padded to 40: 'y' max |diff| 2.04 of 2.96"));
  ASSERT_TRUE(advice);
  EXPECT_NE(advice->find("Buckets would not serve them: padding changes this model's outputs (x.1 = 8 padded to 40: 'y' max |diff| 2.04 of 2.96)"),
            std::string::npos)
      << *advice;
  EXPECT_EQ(advice->find("shapes.buckets="), std::string::npos) << *advice;
}

TEST(Buckets, AnOutputThatDoesNotFollowThePaddedDimRefusesThem) {
  synth::ConvZooSpec zoo;
  zoo.convs = 2;
  zoo.max_spatial = 16;
  zoo.dynamic_spatial = true;
  const std::string model = synth::write_conv_zoo((test::scratch_dir() / "convzoo-pooled.onnx").string(), zoo).path;
  SessionSpec probe;
  probe.model_path = model;
  const std::string input = Session(probe).inputs().front().name;
  SessionSpec spec = probe;
  spec.config.shapes.buckets = {parse_buckets(input + ".2=8,16")};
  spec.dynamic_dim = 8;
  const std::string why = expect_error([&] {
    Session s(spec);
    s.warm_up(1);
  });
  EXPECT_NE(why.find("refused: output"), std::string::npos) << why;
  EXPECT_NE(why.find("has no dim that follows it"), std::string::npos) << why;
}

TEST(Buckets, BadDeclarationsAreClearErrors) {
  auto with = [](std::vector<DimBuckets> b, int max_sessions = 8) {
    SessionSpec spec;
    spec.model_path = test::segmenter_model();
    spec.config.shapes.buckets = std::move(b);
    spec.config.shapes.max_sessions = max_sessions;
    return expect_error([&] { Session s(spec); });
  };
  EXPECT_NE(with({parse_buckets("picture.2=32")}).find("no input 'picture'"), std::string::npos);
  EXPECT_NE(with({parse_buckets("image.1=3")}).find("is fixed by the model"), std::string::npos);
  EXPECT_NE(with({parse_buckets("image.4=3")}).find("has no dim 4"), std::string::npos);
  // Declared through a dim of the same name twice, with the same sizes: one padded dim.
  SessionSpec twice;
  twice.model_path = test::masked_transformer_model();
  twice.config.shapes.buckets = {parse_buckets("input_ids.1=16,32"), parse_buckets("attention_mask.1=16,32")};
  EXPECT_EQ(Session(twice).declared_shapes().size(), 2u);
  twice.config.shapes.buckets.back() = parse_buckets("attention_mask.1=16,64");
  EXPECT_NE(expect_error([&] { Session s(twice); }).find("pad the same dim ('sequence') to different sizes"), std::string::npos);
  twice.config.shapes.buckets.pop_back();
  twice.config.shapes.pad_values["input_id"] = 1;  // a typo
  EXPECT_NE(expect_error([&] { Session s(twice); }).find("'input_id', which is not an input"), std::string::npos);
  twice.config.shapes.pad_values = {{"input_ids", 1e12}};  // beyond what the padding takes for int64
  twice.config.shapes.buckets = {parse_buckets("input_ids.1=16,32")};
  Session big(twice);
  EXPECT_NE(expect_error([&] { big.run({tokens("input_ids", 5, 1, false), tokens("attention_mask", 5, 1, true)}); }).find("is not a int64 value"),
            std::string::npos);
  // The cross product is capped: 17 x 17 shapes.
  EXPECT_NE(with({parse_buckets("image.2=8:136:8"), parse_buckets("image.3=8:136:8")}).find("more than 256 shapes"), std::string::npos);
}

TEST(ShapePolicy, OnTheCpuNewShapesShareOneSession) {
  SessionSpec spec;
  spec.model_path = test::dynamic_mlp_model();
  Session s(spec);
  for (int64_t batch : {1, 2, 3, 2, 1}) {
    Tensor in = Tensor::host_copy("input", ElementType::float32, {batch, 64}, nullptr);
    EXPECT_EQ(s.run({in}).front().shape.front(), batch);
  }
  EXPECT_EQ(s.shape_sessions().size(), 1u);
}

TEST(Buckets, PaddedBatchesOfAnImageModelMakeNoOtherShapes) {
  // pad_batch is buckets on the first dims: the declared batches are the only shapes made.
  SessionSpec spec;
  spec.model_path = test::dynamic_resnet18_model();
  spec.config.shapes.batches = {1, 4};
  spec.config.shapes.pad_batch = true;
  Session s(spec);
  EXPECT_EQ(s.declared_shapes().size(), 2u);
  s.warm_up(1);
  const std::vector<Tensor> three = random_inputs(with_shapes(s.inputs(), {{"input", {3, 3, 64, 64}}}), 5);
  EXPECT_EQ(s.run(three).front().shape.front(), 3);
  EXPECT_EQ(s.shape_sessions().size(), 2u);
}

TEST(ShapePolicy, AShapeGetsItsOwnSessionOnceItsSwitchesPaidForOne) {
  detail::ShapeTraffic traffic;
  const detail::ShapeCosts costs{/*steady_ms=*/1, /*switch_ms=*/10, /*new_session_ms=*/25};
  EXPECT_FALSE(traffic.pays_for_session("x=2", true, costs));   // a first call pays cuDNN's search in any session
  EXPECT_FALSE(traffic.pays_for_session("x=2", true, costs));   // a return: 10 paid
  EXPECT_FALSE(traffic.pays_for_session("x=2", false, costs));  // no switch, nothing paid
  EXPECT_FALSE(traffic.pays_for_session("x=2", true, costs));   // 20
  EXPECT_TRUE(traffic.pays_for_session("x=2", true, costs));    // 30: a session of its own pays now
  EXPECT_FALSE(traffic.pays_for_session("x=3", true, costs));  // each shape pays for itself
  // A stream of ever-new shapes never buys one, however cheap a session is.
  const detail::ShapeCosts cheap{1, 10, 0.5};
  for (int i = 10; i < 40; ++i) EXPECT_FALSE(traffic.pays_for_session("x=" + std::to_string(i), true, cheap));
  // Switching that costs nothing (the CPU EP, or a runtime that keeps plans) never buys a session.
  const detail::ShapeCosts free_switch{1, 0.1, 0.05};
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(traffic.pays_for_session("x=4", true, free_switch));
  EXPECT_FALSE(traffic.pays_for_session("x=5", true, std::nullopt));
}

TEST(ShapePolicy, AStreamOfNewShapesIsToldOnceWhichBucketsWouldServeIt) {
  detail::ShapeTraffic traffic;
  auto note = [&](const InputShapes& s) { traffic.note(to_string(s), s); };
  for (int64_t i = 0; i < 9; ++i) note({{"x", {1, 3, 320 + 64 * i, 960 - 32 * i}}});
  EXPECT_FALSE(traffic.advice_once(9));
  note({{"x", {1, 3, 352, 352}}});
  const auto advice = traffic.advice_once(9);
  ASSERT_TRUE(advice);
  EXPECT_NE(advice->find("10 distinct input shapes"), std::string::npos) << *advice;
  EXPECT_NE(advice->find("x dim 2: 320..832"), std::string::npos) << *advice;
  EXPECT_NE(advice->find("`shapes.buckets=x.2="), std::string::npos) << *advice;
  EXPECT_NE(advice->find("`shapes.buckets=x.3="), std::string::npos) << *advice;
  EXPECT_EQ(advice->find("x.1="), std::string::npos) << *advice;  // a dim that never varied
  EXPECT_FALSE(traffic.advice_once(9));                          // said once
  EXPECT_EQ(to_string(detail::suggested_buckets("x", 2, 320, 960, 32)), "x.2=320,512,736,960");
  EXPECT_EQ(to_string(detail::suggested_buckets("ids", 1, 8, 256, 1)), "ids.1=8,90,173,256");
}

TEST(ShapePolicy, CostsAreKeptBesideTheCacheEntry) {
  const fs::path dir = test::scratch_dir() / "shape-costs";
  fs::create_directories(dir);
  const std::string entry = (dir / "model-abc.onnx").string();
  fs::remove(entry + ".shape-costs.json");
  EXPECT_FALSE(detail::read_shape_costs(entry, "exhaustive"));
  detail::write_shape_costs(entry, "exhaustive", {2.5, 40, 300});
  EXPECT_FALSE(detail::read_shape_costs(entry, "heuristic"));  // measured under other CUDA options
  const auto back = detail::read_shape_costs(entry, "exhaustive");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->switch_ms, 40);
  EXPECT_EQ(back->new_session_ms, 300);
  EXPECT_TRUE(back->switching_costs());
  std::ofstream(entry + ".shape-costs.json") << "{not json";
  EXPECT_FALSE(detail::read_shape_costs(entry, "exhaustive"));
}

// One shape advice per provider (issue 59): on the CPU a new shape costs about a steady call, so one
// session serves every shape and nothing is to be declared; on a CUDA GPU each new shape rebuilds cuDNN's
// plans, so the shapes served are declared or padded to buckets, named as settings.
TEST(ShapeAdvice, OnTheCpuOneSessionServesEveryShape) {
  EXPECT_FALSE(detail::new_shapes_cost(Device::cpu()));
  const std::string advice = detail::shape_advice(Device::cpu());
  EXPECT_NE(advice.find("one session serves every shape"), std::string::npos) << advice;
  EXPECT_EQ(advice.find("declare"), std::string::npos) << advice;
  EXPECT_EQ(advice.find("--"), std::string::npos) << advice;  // a setting's name, never a flag
}

TEST(ShapeAdvice, OnAGpuDeclareTheShapesOrPadToBuckets) {
  EXPECT_TRUE(detail::new_shapes_cost(Device::cuda(0)));
  const std::string advice = detail::shape_advice(Device::cuda(0));
  EXPECT_NE(advice.find("`shapes.batches=1,2,4,8`"), std::string::npos) << advice;
  EXPECT_NE(advice.find("`shapes.buckets`"), std::string::npos) << advice;
  EXPECT_EQ(advice.find("--"), std::string::npos) << advice;
}

}  // namespace ortfleet
