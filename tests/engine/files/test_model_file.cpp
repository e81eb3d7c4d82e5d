#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "engine/files/model_file.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "synth/onnx_writer.hpp"
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

std::string model_file_error(const std::string& path) {
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
  EXPECT_NE(model_file_error("/nonexistent/m.onnx").find("does not exist"), std::string::npos);
  EXPECT_NE(model_file_error(test::scratch_dir().string()).find("is a folder"), std::string::npos);
  EXPECT_NE(model_file_error(write("empty.onnx", "")).find("is empty"), std::string::npos);
  EXPECT_NE(model_file_error(write("text.onnx", "hello, this is text\n")).find("is not an ONNX model (it looks like a text file)"), std::string::npos);
  EXPECT_NE(model_file_error(write("json.onnx", R"({"model": 1})")).find("is not an ONNX model"), std::string::npos);
  EXPECT_NE(model_file_error(write("binary.onnx", std::string("\x08\x07\xff\xff\xff\xff", 6))).find("is not an ONNX model"), std::string::npos);
  EXPECT_EQ(model_file_error(""), "no model path given. Give the path of an .onnx model ('ortfleet synth' writes test models)");
}

// A named pipe or a device is said as what it is, not "cannot read the size of X: Operation not supported"
// (issue 58's audit), and never opened (a pipe with no writer would wait).
TEST(ModelFile, APipeOrADeviceIsNamedForWhatItIs) {
  const fs::path fifo = test::scratch_dir() / "model-fifo.onnx";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(model_file_error(fifo.string()),
            fifo.string() + " is a named pipe, not a model file. Give the path of an .onnx model ('ortfleet synth' writes test models)");
  EXPECT_NE(model_file_error("/dev/null").find("/dev/null is a device, not a model file"), std::string::npos) << model_file_error("/dev/null");
  fs::remove(fifo);
}

TEST(ModelFile, AFileFoundValidIsCheckedAgainOnceItChanges) {
  std::stringstream model;
  model << std::ifstream(test::mlp_model(), std::ios::binary).rdbuf();
  const std::string path = write("changes.onnx", model.str());
  EXPECT_NO_THROW(validate_model_file(path));
  EXPECT_NO_THROW(validate_model_file(path));  // the same file: found valid before
  write("changes.onnx", "hello, this is text\n");
  EXPECT_NE(model_file_error(path).find("is not an ONNX model"), std::string::npos) << model_file_error(path);
  write("changes.onnx", model.str());
  EXPECT_NO_THROW(validate_model_file(path));
}

TEST(ModelFile, SymbolicLinkLoopsAndDanglingLinksAreNamedAsSuch) {
  const fs::path a = test::scratch_dir() / "loop-a.onnx";
  const fs::path b = test::scratch_dir() / "loop-b.onnx";
  fs::create_symlink(b, a);
  fs::create_symlink(a, b);
  EXPECT_NE(model_file_error(a.string()).find("loop-a.onnx is a symbolic link loop"), std::string::npos) << model_file_error(a.string());
  const fs::path dangling = test::scratch_dir() / "dangling.onnx";
  fs::create_symlink(test::scratch_dir() / "gone.onnx", dangling);
  EXPECT_NE(model_file_error(dangling.string()).find("is a symbolic link to " + (test::scratch_dir() / "gone.onnx").string() + ", which does not exist"),
            std::string::npos)
      << model_file_error(dangling.string());
}

TEST(ModelFile, TruncatedModelsAreCaught) {
  std::ifstream in(test::mlp_model(), std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  const std::string cut = write("truncated.onnx", bytes.substr(0, bytes.size() / 2));
  EXPECT_NE(model_file_error(cut).find("truncated"), std::string::npos) << model_file_error(cut);
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

namespace ortfleet {

namespace {
using onnx::DataType;
using onnx::Dim;
using onnx::ProtoMessage;

std::string save(const std::string& name, const ProtoMessage& m) {
  const auto path = (test::scratch_dir() / name).string();
  std::ofstream out(path, std::ios::binary);
  m.write(out);
  return path;
}

/// x -> Identity -> y, with x and y of `shape`; no graph outputs at all when `outputs` is false.
std::string identity_model(const std::string& name, const std::vector<Dim>& shape, bool outputs = true) {
  onnx::GraphParts p;
  p.name = "identity";
  p.nodes.push_back(onnx::node("Identity", "id", {"x"}, {"y"}));
  p.inputs.push_back(onnx::value_info("x", DataType::float32, shape));
  if (outputs) p.outputs.push_back(onnx::value_info("y", DataType::float32, shape));
  return save(name, onnx::model(std::move(p), 17, {}));
}

ProtoMessage graph_attribute(const std::string& name, ProtoMessage graph) {
  ProtoMessage a;
  a.bytes(1, name);
  a.message(6, std::move(graph));
  a.varint(20, 5);  // AttributeProto.type = GRAPH
  return a;
}

/// A graph whose If's then-branch holds the next level's graph, `depth` levels down; every branch
/// passes the outer x through.
ProtoMessage nested_graph(int level, int depth) {
  ProtoMessage g;
  const std::string out = "out" + std::to_string(level);
  if (level == depth) {
    g.message(1, onnx::node("Identity", "id" + std::to_string(level), {"x"}, {out}));
  } else {
    ProtoMessage n = onnx::node("If", "if" + std::to_string(level), {"cond"}, {out});
    n.message(5, graph_attribute("then_branch", nested_graph(level + 1, depth)));
    ProtoMessage leaf;
    const std::string leaf_out = "leaf" + std::to_string(level);
    leaf.message(1, onnx::node("Identity", leaf_out, {"x"}, {leaf_out}));
    leaf.bytes(2, leaf_out);
    leaf.message(12, onnx::value_info(leaf_out, DataType::float32, {2, 3}));
    n.message(5, graph_attribute("else_branch", std::move(leaf)));
    g.message(1, std::move(n));
  }
  g.bytes(2, "g" + std::to_string(level));
  g.message(12, onnx::value_info(out, DataType::float32, {2, 3}));
  return g;
}

std::string nested_model(int depth) {
  ProtoMessage graph = nested_graph(0, depth);
  graph.message(11, onnx::value_info("x", DataType::float32, {2, 3}));
  graph.message(11, onnx::value_info("cond", DataType::bool_, {}));
  ProtoMessage opset;
  opset.bytes(1, "");
  opset.int64(2, 17);
  ProtoMessage m;
  m.int64(1, 8);
  m.message(8, std::move(opset));
  m.message(7, std::move(graph));
  return save("nested" + std::to_string(depth) + ".onnx", m);
}

std::string start_error(const std::string& model) {
  try {
    SessionSpec spec;
    spec.model_path = model;
    Session session(spec);
    session.warm_up();
  } catch (const Error& e) {
    return e.what();
  }
  return "(started)";
}
}  // namespace

// ONNX Runtime creates a session of a model that declares no outputs and fails its first run ("At
// least one output should be requested"; "MaxIdx() > -1 was false" elsewhere): the start says what the
// model lacks instead of blaming the warm-up inputs ortfleet made up.
TEST(ModelFile, AModelWithNoOutputsIsRefusedForWhatItLacks) {
  const std::string error = start_error(identity_model("no-outputs.onnx", {2, 3}, /*outputs=*/false));
  EXPECT_NE(error.find("no-outputs.onnx declares no outputs"), std::string::npos) << error;
  EXPECT_NE(error.find("Re-export it with its outputs"), std::string::npos) << error;
  EXPECT_EQ(error.find("made up"), std::string::npos) << error;
  ASSERT_TRUE(detail::model_structure_problem(identity_model("no-outputs.onnx", {2, 3}, false)).has_value());
  EXPECT_FALSE(detail::model_structure_problem(test::mlp_model()).has_value());
}

// Subgraphs nested past what ONNX Runtime's protobuf reader takes fail with "Protobuf parsing
// failed", which called a valid file "not a valid ONNX model": the start says how deep they nest.
TEST(ModelFile, SubgraphsNestedTooDeeplyAreNamedNotCalledAnInvalidFile) {
  EXPECT_EQ(start_error(nested_model(20)), "(started)");
  const std::string error = start_error(nested_model(40));
  EXPECT_NE(error.find("nests subgraphs (the bodies of If, Loop or Scan) 40 deep"), std::string::npos) << error;
  EXPECT_NE(error.find("Flatten the nesting to at most 31 levels"), std::string::npos) << error;
  EXPECT_EQ(error.find("not a valid ONNX model"), std::string::npos) << error;
}

// A negative dim in a model's input: below -1 it is refused, naming the input, the dim and the value;
// -1, which older exporters wrote for "any size" and ONNX Runtime reads as dynamic, starts with a warning.
TEST(ModelFile, NegativeInputDimsAreRefusedOrWarnedOfWithTheValue) {
  const std::string error = start_error(identity_model("dim-minus-5.onnx", {Dim(-5), 3}));
  EXPECT_NE(error.find("declares dim 0 of input 'x' as -5"), std::string::npos) << error;
  const test::CapturedLog log;
  EXPECT_EQ(start_error(identity_model("dim-minus-1.onnx", {Dim(-1), 3})), "(started)");
  EXPECT_EQ(log.count("declares dim 0 of input 'x' as -1: ONNX allows no negative dims"), 1u) << log.text();
  // A dim the model fixes at 0 starts (it was refused: "[0, 3], with a dim of 0; the model expects [0, 3]").
  EXPECT_EQ(start_error(identity_model("dim-0.onnx", {Dim(int64_t{0}), 3})), "(started)");
}

// Fleet.inputs before start(): read from the file, as ONNX Runtime reads them (names, types, dims,
// the dims' names), initializers left out.
TEST(ModelFile, InputAndOutputSpecsAreWhatOnnxRuntimeReads) {
  for (const auto& model : {test::mlp_model(), test::dynamic_resnet18_model(), test::segmenter_model(), test::masked_transformer_model(),
                            test::small_transformer()}) {
    const ModelFacts facts = inspect_model(model);
    SessionSpec spec;
    spec.model_path = model;
    const Session session(spec);
    ASSERT_EQ(facts.input_specs.size(), session.inputs().size()) << model;
    ASSERT_EQ(facts.output_specs.size(), session.outputs().size()) << model;
    const auto same = [&](const TensorSpec& a, const TensorSpec& b) {
      EXPECT_EQ(a.name, b.name) << model;
      EXPECT_EQ(a.type, b.type) << model << " " << a.name;
      EXPECT_EQ(a.shape, b.shape) << model << " " << a.name;
      EXPECT_EQ(a.dim_names, b.dim_names) << model << " " << a.name;
    };
    for (size_t i = 0; i < facts.input_specs.size(); ++i) same(facts.input_specs[i], session.inputs()[i]);
    for (size_t i = 0; i < facts.output_specs.size(); ++i) same(facts.output_specs[i], session.outputs()[i]);
  }
}

}  // namespace ortfleet
