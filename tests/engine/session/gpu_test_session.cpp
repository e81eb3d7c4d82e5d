// GPU tests: they skip themselves where no GPU is present (ctest label "gpu").
#include <gtest/gtest.h>

#include <filesystem>

#include <cmath>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/device_tensor.hpp"
#include "ortfleet/engine/session.hpp"
#include "engine/shapes/shapes.hpp"
#include "ortfleet/engine/timeline.hpp"
#include "ortfleet/synth/synth.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
std::vector<float> output_of(const std::string& model, const Device& device, const RunConfig& config, const std::vector<Tensor>* inputs = nullptr) {
  SessionSpec spec;
  spec.model_path = model;
  spec.device = device;
  spec.config = config;
  Session s(spec);
  const auto in = inputs ? *inputs : random_inputs(s.inputs(), 11);
  const auto out = s.run(in);
  return {out[0].values<float>(), out[0].values<float>() + out[0].element_count()};
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0;
  double norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    norm += want[i] * static_cast<double>(want[i]);
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

RunConfig exact() {
  RunConfig c;
  c.cuda.tf32 = false;  // compare against the CPU in full float32
  return c;
}

SessionSpec on_first_gpu(const std::string& model) {
  SessionSpec spec;
  spec.model_path = model;
  spec.device = Device::cuda(0);
  spec.config = exact();
  return spec;
}
}  // namespace

TEST(GpuSession, ResNetOnTheGpuMatchesTheCpu) {
  ORTFLEET_REQUIRE_GPU();
  SessionSpec cpu;
  cpu.model_path = test::resnet18_model();
  Session reference(cpu);
  const auto inputs = random_inputs(reference.inputs(), 5);
  const auto want = output_of(test::resnet18_model(), Device::cpu(), {}, &inputs);
  const auto got = output_of(test::resnet18_model(), Device::cuda(0), exact(), &inputs);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(relative_error(got, want), 1e-3);
}

TEST(GpuSession, ConvZooRunsWithEveryConvAlgorithmSearch) {
  ORTFLEET_REQUIRE_GPU();
  for (auto search : {ConvAlgoSearch::exhaustive, ConvAlgoSearch::heuristic, ConvAlgoSearch::default_algo}) {
    RunConfig c = exact();
    c.cuda.conv_algo_search = search;
    const auto out = output_of(test::conv_zoo_model(), Device::cuda(0), c);
    ASSERT_GT(out.size(), 120u);
    for (float v : out) ASSERT_TRUE(std::isfinite(v)) << to_string(search);
  }
}

TEST(GpuSession, DeviceTensorsGoInAndOutWithoutHostCopies) {
  ORTFLEET_REQUIRE_GPU();
  SessionSpec spec = on_first_gpu(test::mlp_model());  // input and output are both [1, 64] float32
  Session s(spec);
  const auto host_in = random_inputs(s.inputs(), 2);
  auto on_gpu = s.run(host_in, /*outputs_on_device=*/true);
  ASSERT_TRUE(on_gpu[0].on_gpu());
  on_gpu[0].name = "input";
  const auto again = s.run({on_gpu[0]});  // a device tensor bound as input (IO binding)
  const auto first = s.run(host_in);
  const auto twice = s.run({first[0].name == "input" ? first[0] : Tensor::host_copy("input", ElementType::float32, first[0].shape, first[0].data)});
  ASSERT_EQ(again[0].element_count(), twice[0].element_count());
  for (int64_t i = 0; i < again[0].element_count(); ++i) EXPECT_NEAR(again[0].values<float>()[i], twice[0].values<float>()[i], 1e-5f);
}

TEST(GpuSession, ACapturedCudaGraphFollowsItsInputs) {
  ORTFLEET_REQUIRE_GPU();
  SessionSpec spec = on_first_gpu(test::dynamic_resnet18_model());
  Session plain(spec);
  spec.config.cuda.cuda_graph = true;
  spec.config.shapes.max_sessions = 1;  // one graph for every shape: another shape cannot replay it
  Session graph(spec);
  graph.warm_up(1);  // captures the graph on the warm-up inputs
  // Two different inputs after the capture: a replay that ignored them would repeat the warm-up output.
  for (uint64_t seed : {21u, 22u}) {
    const auto inputs = random_inputs(plain.inputs(), seed);
    const auto want = plain.run(inputs);
    const auto got = graph.run(inputs);
    ASSERT_EQ(got[0].element_count(), want[0].element_count());
    std::vector<float> g(got[0].values<float>(), got[0].values<float>() + got[0].element_count());
    std::vector<float> w(want[0].values<float>(), want[0].values<float>() + want[0].element_count());
    EXPECT_LT(relative_error(g, w), 1e-4) << "seed " << seed;
    const auto on_device = graph.run(inputs, /*outputs_on_device=*/true);  // device outputs are copies, not the graph's buffer
    ASSERT_TRUE(on_device[0].on_gpu());
    EXPECT_NE(on_device[0].data, graph.run(inputs, true)[0].data);
  }
  auto wrong = random_inputs(plain.inputs(), 1);
  wrong[0].shape[0] += 1;  // another batch size: refused before anything is copied
  try {
    graph.run(wrong);
    ADD_FAILURE() << "a shape other than the captured one was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("captured"), std::string::npos) << e.what();
  }
}

TEST(GpuSession, GigabyteTransformerRunsOnTheGpu) {
  ORTFLEET_REQUIRE_GPU();
  const auto path = (test::scratch_dir() / "transformer-1gb-gpu.onnx").string();
  const auto summary = synth::write_transformer(path, {});
  EXPECT_GE(summary.file_bytes, 1'000'000'000u);
  const auto out = output_of(path, Device::cuda(0), {});
  EXPECT_EQ(out.size(), 128u * 1024u);
  for (size_t i = 0; i < out.size(); i += 101) ASSERT_TRUE(std::isfinite(out[i]));
  fs::remove(path);
}

// Both formats of the cache. An ONNX entry's weights reach the GPU through ortfleet's staged upload
// (ResNet-18's 46 MB: two 32 MiB chunks, weights split across the boundary); an ORT entry's through
// ONNX Runtime, from the FlatBuffer saved with the CUDA EP's node assignment.
TEST(GpuSession, ModelCacheHitOnTheGpuGivesTheSameResults) {
  ORTFLEET_REQUIRE_GPU();
  for (const ModelCacheFormat format : {ModelCacheFormat::onnx, ModelCacheFormat::ort}) {
    SCOPED_TRACE(to_string(format));
    SessionSpec spec = on_first_gpu(test::resnet18_model());
    spec.config.session.optimized_model_cache = true;
    spec.config.session.model_cache_fill = ModelCacheFill::inline_start;  // what a background fill does
    spec.config.session.model_cache_format = format;
    spec.cache_dir = (test::scratch_dir() / ("gpu-cache-" + to_string(format))).string();
    std::filesystem::remove_all(spec.cache_dir);
    std::vector<float> first;
    std::vector<Tensor> inputs;
    {
      Session miss(spec);
      EXPECT_FALSE(miss.used_model_cache());
      inputs = random_inputs(miss.inputs(), 3);
      const auto out = miss.run(inputs);
      first.assign(out[0].values<float>(), out[0].values<float>() + out[0].element_count());
    }
    Timeline timeline;
    Session hit(spec, &timeline);
    EXPECT_TRUE(hit.used_model_cache());
    // A hit's weights reach the GPU in ortfleet's staged upload, read from the entry of either format
    // (an ORT entry's from its FlatBuffer), and the session uses them in place.
    int uploads = 0;
    for (const auto& e : timeline.events()) {
      if (e.name != phase::weights_upload) continue;
      ++uploads;
      EXPECT_GT(std::stoll(e.args.at("initializers")), 10);  // ResNet-18's convolution weights
      EXPECT_GT(std::stoll(e.args.at("bytes")), 40'000'000);  // 11.7 M parameters
    }
    EXPECT_EQ(uploads, 1);
    const auto out = hit.run(inputs);
    const std::vector<float> second(out[0].values<float>(), out[0].values<float>() + out[0].element_count());
    EXPECT_LT(relative_error(second, first), 1e-4);
  }
}

TEST(GpuSession, ADeviceThatDoesNotExistFailsWithItsName) {
  ORTFLEET_REQUIRE_GPU();
  SessionSpec spec;
  spec.model_path = test::mlp_model();
  spec.device = Device::cuda(64);
  try {
    Session s(spec);
    FAIL() << "cuda:64 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:64"), std::string::npos) << e.what();
  }
}

}  // namespace ortfleet

namespace ortfleet {

TEST(GpuSession, ShapeAwareSessionsMatchTheCpuForEveryShapeAndCudaGraph) {
  ORTFLEET_REQUIRE_GPU();
  const std::string& model = test::dynamic_resnet18_model();
  for (const bool graph : {false, true}) {
    SessionSpec gpu;
    gpu.model_path = model;
    gpu.device = Device::cuda(0);
    gpu.config.cuda.tf32 = false;
    gpu.config.cuda.cuda_graph = graph;
    gpu.config.shapes.batches = {1, 3};
    gpu.config.shapes.policy = ShapePolicy::per_shape;  // batch 2 gets a session of its own too
    Session on_gpu(gpu);
    on_gpu.warm_up(1);
    SessionSpec cpu;
    cpu.model_path = model;
    Session on_cpu(cpu);
    for (int round = 0; round < 2; ++round) {
      for (const int64_t batch : {1, 3, 2}) {  // 2 was not declared: a session made on demand
        ShapeOptions one;
        one.batches = {batch};
        const auto in = random_inputs(with_shapes(on_gpu.inputs(), resolve_shapes(on_gpu.inputs(), one, 1).front()), 100 + static_cast<uint64_t>(batch));
        const auto got = on_gpu.run(in);
        const auto want = on_cpu.run(in);
        ASSERT_EQ(got[0].shape, want[0].shape);
        const std::vector<float> g(got[0].values<float>(), got[0].values<float>() + got[0].element_count());
        const std::vector<float> w(want[0].values<float>(), want[0].values<float>() + want[0].element_count());
        EXPECT_LT(relative_error(g, w), 1e-4) << "batch " << batch << (graph ? " (cuda graph)" : "");
      }
    }
    const auto sessions = on_gpu.shape_sessions();
    EXPECT_EQ(sessions.size(), 3u);
    for (const auto& s : sessions) {
      EXPECT_EQ(s.calls, s.declared ? (graph ? 5 : 3) : 2) << s.shapes;  // warm-up runs of a declared shape (3 to capture a graph), then two rounds
      EXPECT_GT(s.memory_bytes, 0u) << s.shapes;
    }
  }
}

}  // namespace ortfleet

namespace ortfleet {

TEST(GpuSession, BucketsPadOnTheGpuAndCropWhatTheCpuCrops) {
  ORTFLEET_REQUIRE_GPU();
  const std::string& model = test::segmenter_model();
  const std::vector<DimBuckets> buckets = {parse_buckets("image.2=64,128"), parse_buckets("image.3=64,128")};
  SessionSpec gpu = on_first_gpu(model);
  gpu.config.shapes.buckets = buckets;
  Session on_gpu(gpu);
  on_gpu.warm_up(1);
  SessionSpec cpu;
  cpu.model_path = model;
  cpu.config.shapes.buckets = buckets;  // the same padding: the same values, up to the GPU's rounding
  Session on_cpu(cpu);
  on_cpu.warm_up(1);
  for (const auto& [h, w] : {std::pair<int64_t, int64_t>{40, 96}, {128, 16}, {72, 72}}) {
    const std::vector<Tensor> host = random_inputs(with_shapes(on_cpu.inputs(), {{"image", {1, 3, h, w}}}), 21);
    const auto want = on_cpu.run(host);
    for (const bool device_io : {false, true}) {
      const std::vector<Tensor> in = device_io ? std::vector<Tensor>{copy_to_device(host[0], Device::cuda(0))} : host;
      auto got = on_gpu.run(in, /*outputs_on_device=*/device_io);
      ASSERT_EQ(got[0].shape, (std::vector<int64_t>{1, 1, h / 4, w / 4})) << h << "x" << w;
      ASSERT_EQ(got[0].on_gpu(), device_io);
      if (device_io) got[0] = copy_to_host(got[0]);
      const std::vector<float> g(got[0].values<float>(), got[0].values<float>() + got[0].element_count());
      const std::vector<float> c(want[0].values<float>(), want[0].values<float>() + want[0].element_count());
      EXPECT_LT(relative_error(g, c), 1e-4) << h << "x" << w << (device_io ? " (device tensors)" : "");
    }
  }
  EXPECT_EQ(on_gpu.shape_sessions().size(), 4u);
}

}  // namespace ortfleet

namespace ortfleet {

// A first start on a GPU (an empty cache: the model's view, its weights uploaded by ortfleet where the
// GPU holds them twice) gives a plain session's outputs, for a conv net, a conv zoo and a transformer.
TEST(GpuSession, AFirstStartFromTheModelsViewGivesThePlainSessionsOutputs) {
  ORTFLEET_REQUIRE_GPU();
  for (const auto& model : {test::resnet18_model(), test::conv_zoo_model(), test::masked_transformer_model()}) {
    SCOPED_TRACE(model);
    SessionSpec cpu;
    cpu.model_path = model;
    Session reference(cpu);
    const auto inputs = random_inputs(reference.inputs(), 7);
    const auto plain = output_of(model, Device::cuda(0), exact(), &inputs);
    const fs::path cache = test::fresh_dir("gpu-first-start-view");
    SessionSpec first = on_first_gpu(model);
    first.cache_dir = cache.string();
    first.config.session.optimized_model_cache = true;
    first.config.session.model_cache_fill = ModelCacheFill::off;
    Timeline timeline;
    Session s(first, &timeline);
    const auto out = s.run(inputs);
    const std::vector<float> got(out[0].values<float>(), out[0].values<float>() + out[0].element_count());
    ASSERT_EQ(got.size(), plain.size());
    EXPECT_LT(relative_error(got, plain), 1e-6);
    bool uploaded = false;
    for (const auto& e : timeline.events()) uploaded = uploaded || e.name == phase::weights_upload;
    EXPECT_TRUE(uploaded) << "ortfleet uploads the weights the view leaves in the file";
  }
}

}  // namespace ortfleet
