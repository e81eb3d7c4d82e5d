#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "test_support.hpp"
#include "ortfleet/engine/model_file.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
std::string write(const std::string& name, const std::string& bytes) {
  const auto path = (test::scratch_dir() / name).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string error_of(const std::string& path) {
  try {
    validate_model_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(ModelFile, AcceptsRealModels) {
  EXPECT_NO_THROW(validate_model_file(test::mlp_model()));
  EXPECT_NO_THROW(validate_model_file(test::small_transformer()));
}

TEST(ModelFile, SaysWhatIsWrongWithBadInput) {
  EXPECT_NE(error_of("/nonexistent/m.onnx").find("does not exist"), std::string::npos);
  EXPECT_NE(error_of(test::scratch_dir().string()).find("is a folder"), std::string::npos);
  EXPECT_NE(error_of(write("empty.onnx", "")).find("is empty"), std::string::npos);
  EXPECT_NE(error_of(write("text.onnx", "hello, this is text\n")).find("is not an ONNX model (it looks like a text file)"), std::string::npos);
  EXPECT_NE(error_of(write("json.onnx", R"({"model": 1})")).find("is not an ONNX model"), std::string::npos);
  EXPECT_NE(error_of(write("binary.onnx", std::string("\x08\x07\xff\xff\xff\xff", 6))).find("is not an ONNX model"), std::string::npos);
  EXPECT_EQ(error_of(""), "no model path given. Give the path of an .onnx model ('ortfleet synth' writes test models)");
}

TEST(ModelFile, AFileFoundValidIsCheckedAgainOnceItChanges) {
  std::stringstream model;
  model << std::ifstream(test::mlp_model(), std::ios::binary).rdbuf();
  const std::string path = write("changes.onnx", model.str());
  EXPECT_NO_THROW(validate_model_file(path));
  EXPECT_NO_THROW(validate_model_file(path));  // the same file: found valid before
  write("changes.onnx", "hello, this is text\n");
  EXPECT_NE(error_of(path).find("is not an ONNX model"), std::string::npos) << error_of(path);
  write("changes.onnx", model.str());
  EXPECT_NO_THROW(validate_model_file(path));
}

TEST(ModelFile, SymbolicLinkLoopsAndDanglingLinksAreNamedAsSuch) {
  const fs::path a = test::scratch_dir() / "loop-a.onnx";
  const fs::path b = test::scratch_dir() / "loop-b.onnx";
  fs::create_symlink(b, a);
  fs::create_symlink(a, b);
  EXPECT_NE(error_of(a.string()).find("loop-a.onnx is a symbolic link loop"), std::string::npos) << error_of(a.string());
  const fs::path dangling = test::scratch_dir() / "dangling.onnx";
  fs::create_symlink(test::scratch_dir() / "gone.onnx", dangling);
  EXPECT_NE(error_of(dangling.string()).find("is a symbolic link to " + (test::scratch_dir() / "gone.onnx").string() + ", which does not exist"),
            std::string::npos)
      << error_of(dangling.string());
}

TEST(ModelFile, TruncatedModelsAreCaught) {
  std::ifstream in(test::mlp_model(), std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  const std::string cut = write("truncated.onnx", bytes.substr(0, bytes.size() / 2));
  EXPECT_NE(error_of(cut).find("truncated"), std::string::npos) << error_of(cut);
}

TEST(ModelFile, InspectCountsNodesAndWeightsWithoutLoadingThem) {
  const ModelFacts f = inspect_model(test::mlp_model());
  EXPECT_EQ(f.ir_version, 8);
  EXPECT_EQ(f.opset, 17);
  EXPECT_EQ(f.nodes, 9);
  EXPECT_EQ(f.op_counts.at("MatMul"), 3);
  EXPECT_EQ(f.initializers, 6);
  EXPECT_EQ(f.initializer_bytes, 3u * (64 * 64 + 64) * 4);
  EXPECT_FALSE(f.external_data);
  EXPECT_EQ(f.inputs, std::vector<std::string>{"input"});
}

}  // namespace ortfleet

namespace ortfleet {

TEST(ModelFile, NamesTheInputsDimsWithoutAFixedSize) {
  EXPECT_TRUE(inspect_model(test::mlp_model()).dynamic_dims.empty());
  EXPECT_EQ(inspect_model(test::dynamic_mlp_model()).dynamic_dims, (std::vector<std::string>{"input[0] (batch)"}));
  const std::string zoo = (test::scratch_dir() / "zoo-dynamic.onnx").string();
  synth::ConvZooSpec spec;
  spec.convs = 2;
  spec.max_spatial = 14;
  spec.dynamic_spatial = true;
  const auto dims = inspect_model(synth::write_conv_zoo(zoo, spec).path).dynamic_dims;
  ASSERT_FALSE(dims.empty());
  for (const auto& d : dims) EXPECT_TRUE(d.find("[2] (height_") != std::string::npos || d.find("[3] (width_") != std::string::npos) << d;
}

}  // namespace ortfleet
