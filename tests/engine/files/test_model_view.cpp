// The model's view (its graph, its large weights left where they lie in its file) and its layout.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "engine/cache/model_digest.hpp"
#include "engine/files/mapped_file.hpp"
#include "engine/files/model_file.hpp"
#include "engine/files/model_view.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/synth/synth.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
fs::path folder(const std::string& name) { return test::fresh_dir(fs::path("model-view") / name); }

detail::ModelView view_of_file(const std::string& path) {
  const detail::MappedFile mapped(path);
  return detail::view_of(path, mapped.data(), mapped.size());
}

std::string mlp(const fs::path& dir, const std::string& name, int layers, uint64_t seed) {
  synth::MlpSpec spec;
  spec.layers = layers;
  synth::WriteOptions options;
  options.seed = seed;
  return synth::write_mlp((dir / name).string(), spec, options).path;
}
}  // namespace

// Every weight of 1 kB and more is named by where its bytes lie in the .onnx: read back through the
// view (written beside the model, so that its "location" is the model's own file), each initializer's
// bytes are the model's raw bytes, and the view is a small fraction of the file.
TEST(ModelView, LargeWeightsPointAtTheirOwnBytesInTheModelsFile) {
  const fs::path dir = folder("points");
  const std::string model = mlp(dir, "m.onnx", 3, 1);
  const detail::ModelView view = view_of_file(model);
  ASSERT_FALSE(view.model.empty());
  const auto raw = detail::initializer_bytes(model);
  uint64_t large = 0;
  uint64_t large_bytes = 0;
  for (const auto& w : raw) {
    if (w.bytes >= detail::kWeightInPlaceMinBytes) {
      ++large;
      large_bytes += w.bytes;
    }
  }
  EXPECT_EQ(view.initializers, large);
  EXPECT_EQ(view.bytes, large_bytes);
  EXPECT_LT(view.model.size(), fs::file_size(model) - large_bytes + 4096);

  const std::string written = (dir / "view.onnx").string();
  std::ofstream(written, std::ios::binary) << view.model;
  const auto through_view = detail::initializer_bytes(written);
  ASSERT_EQ(through_view.size(), raw.size());
  const std::string bytes = test::read_all(model);
  for (size_t i = 0; i < raw.size(); ++i) {
    SCOPED_TRACE(raw[i].name);
    EXPECT_EQ(through_view[i].name, raw[i].name);
    EXPECT_EQ(through_view[i].dims, raw[i].dims);
    EXPECT_EQ(through_view[i].bytes, raw[i].bytes);
    const bool moved = raw[i].bytes >= detail::kWeightInPlaceMinBytes;
    EXPECT_EQ(through_view[i].file, moved ? fs::absolute(model).string() : fs::absolute(written).string());
    if (moved) {
      EXPECT_EQ(bytes.compare(through_view[i].offset, raw[i].bytes, bytes, raw[i].offset, raw[i].bytes), 0);
    }
  }
}

// Two models of one content have one layout, whatever the values of their large weights; another graph,
// or other sizes, another layout.
TEST(ModelView, TheLayoutIsTheGraphAndTheSizesOfTheLargeWeightsNotTheirValues) {
  const fs::path dir = folder("layout");
  const std::string a = mlp(dir, "a.onnx", 3, 1);
  const uint64_t layout = view_of_file(a).layout;
  const std::string b = test::copy_with_other_weights(a, dir / "b.onnx");
  EXPECT_EQ(view_of_file(b).layout, layout);
  EXPECT_NE(test::read_all(b), test::read_all(a));
  EXPECT_NE(view_of_file(mlp(dir, "c.onnx", 4, 1)).layout, layout);
  // As the cache keys it, external data included (the small transformer's weights are all external):
  // the data file's size stands for its weights.
  const std::string t1 = test::write_small_transformer(dir / "t1.onnx", 1);
  EXPECT_EQ(view_of_file(t1).initializers, 0u);
  EXPECT_TRUE(view_of_file(t1).model.empty());
  const std::string before = detail::model_layout(t1);
  EXPECT_NE(before.find("|data:t1.onnx.data:"), std::string::npos) << before;
  {
    std::fstream data(t1 + ".data", std::ios::in | std::ios::out | std::ios::binary);
    data.seekp(16);
    data.write("\x7f\x7f\x7f\x7f", 4);
  }
  EXPECT_EQ(detail::model_layout(t1), before);
  fs::resize_file(t1 + ".data", fs::file_size(t1 + ".data") + 4);
  EXPECT_NE(detail::model_layout(t1), before);
}

TEST(ModelView, ATruncatedModelIsAnErrorNotACrash) {
  const fs::path dir = folder("truncated");
  const std::string model = mlp(dir, "m.onnx", 3, 1);
  const std::string bytes = test::read_all(model);
  for (size_t keep : {size_t{1}, size_t{7}, bytes.size() / 3, bytes.size() - 1}) {
    SCOPED_TRACE(keep);
    EXPECT_THROW(detail::view_of(model, bytes.data(), keep), Error);
  }
}

}  // namespace ortfleet
