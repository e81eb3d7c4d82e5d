#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/runtime/ort_errors.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "synth/onnx_writer.hpp"
#include "test_support.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;
using onnx::DataType;
using onnx::ProtoMessage;

namespace {

/// Texts as ONNX Runtime 1.29 gives them (the Python API adds the "[ONNXRuntimeError] : N : CODE :" prefix).
constexpr const char* kIrVersion =
    "[ONNXRuntimeError] : 1 : FAIL : Load model from x.onnx failed:/onnxruntime/onnxruntime/core/graph/model.cc:180 "
    "onnxruntime::Model::Model(onnx::ModelProto&&, const onnxruntime::PathString&, const "
    "onnxruntime::IOnnxRuntimeOpSchemaRegistryList*, const onnxruntime::logging::Logger&, const onnxruntime::ModelOptions&) "
    "Unsupported model IR version: 99, max supported IR version: 13";
constexpr const char* kOpset =
    "Load model from m.onnx failed:/onnxruntime_src/onnxruntime/core/graph/model_load_utils.h:46 void "
    "onnxruntime::model_load_utils::ValidateOpsetForDomain(const std::unordered_map<std::__cxx11::basic_string<char>, "
    "int>&, const onnxruntime::logging::Logger&, bool, const std::string&, int) ONNX Runtime only *guarantees* support "
    "for models stamped with official released onnx opset versions. Opset 9999 is under development and support for "
    "this is limited. The operator schemas and or other functionality may change before next ONNX release and in this "
    "case ONNX Runtime will not guarantee backward compatibility. Current official support for domain ai.onnx is till "
    "opset 26.\n";
constexpr const char* kCuda =
    "/onnxruntime_src/onnxruntime/core/providers/cuda/cuda_call.cc:129 std::conditional_t<THRW, void, "
    "onnxruntime::common::Status> onnxruntime::CudaCall(ERRTYPE, const char*, const char*, SUCCTYPE, const char*, const "
    "char*, int) [with ERRTYPE = cudaError; bool THRW = true; SUCCTYPE = cudaError; std::conditional_t<THRW, void, "
    "onnxruntime::common::Status> = void] /onnxruntime_src/onnxruntime/core/providers/cuda/cuda_call.cc:121 "
    "std::conditional_t<THRW, void, onnxruntime::common::Status> onnxruntime::CudaCall(ERRTYPE, const char*, const "
    "char*, SUCCTYPE, const char*, const char*, int) [with ERRTYPE = cudaError; bool THRW = true; SUCCTYPE = cudaError; "
    "std::conditional_t<THRW, void, onnxruntime::common::Status> = void] CUDA failure 999: unknown error ; GPU=1 ; "
    "hostname=node17 ; file=/onnxruntime_src/onnxruntime/core/providers/cuda/cuda_execution_provider.cc ; line=282 ; "
    "expr=cudaSetDevice(info_.device_id); ";
constexpr const char* kUnknownOp =
    "Load model from m.onnx failed:This is an invalid model. In Node, (\"conv7\", Frobnicate, \"\", -1) : (\"x\": "
    "tensor(float),) -> (\"y\": tensor(float),) , Error No Op registered for Frobnicate with domain_version of 17";
constexpr const char* kAbsoluteExternal =
    "External data path validation failed for initializer: w. Error: tensorprotoutils.cc:426 "
    "ValidateExternalDataPathFromDir Absolute path not allowed for external data location";

/// A write of an entry's external data on a full disk (ONNX Runtime 1.29, a 600 kB tmpfs, issue 58's
/// re-audit): the status prefix follows the first frame's location and signature.
constexpr const char* kFullDisk =
    "/onnxruntime_src/onnxruntime/core/graph/graph.cc:5331 onnx::GraphProto "
    "onnxruntime::Graph::ToGraphProtoWithExternalInitializers(const std::filesystem::__cxx11::path&, const "
    "std::filesystem::__cxx11::path&, const onnxruntime::ModelSavingOptions&) const [ONNXRuntimeError] : 1 : FAIL : "
    "graph.cc:5256 AddExternalInitializersToGraphProtoImpl Failed to write external initializers to file: "
    "\"/cache/models/m-01ad.onnx.data\"\n";

void expect_short(const OrtFailure& f) {
  EXPECT_LE(f.cause.size(), 310u) << f.cause;
  for (const char* noise : {"[ONNXRuntimeError]", ".cc:", ".h:", "onnxruntime::", "Load model from", "hostname=", "\n"}) {
    EXPECT_EQ(f.cause.find(noise), std::string::npos) << "'" << noise << "' left in: " << f.cause;
  }
}

void save(const fs::path& path, const ProtoMessage& model) {
  std::ofstream out(path, std::ios::binary);
  model.write(out);
}

/// y = Relu(x) (or Add(x, w) with an initializer), x and y float [1, 4]; `outputs` false leaves y undeclared.
ProtoMessage small_model(int64_t opset, bool outputs, ProtoMessage* weight = nullptr) {
  onnx::GraphParts g;
  g.name = "g";
  g.nodes.push_back(weight ? onnx::node("Add", "add", {"x", "w"}, {"y"}) : onnx::node("Relu", "relu", {"x"}, {"y"}));
  if (weight) g.initializers.push_back(std::move(*weight));
  g.inputs.push_back(onnx::value_info("x", DataType::float32, {1, 4}));
  if (outputs) g.outputs.push_back(onnx::value_info("y", DataType::float32, {1, 4}));
  return onnx::model(std::move(g), opset, {});
}

Error session_error(const fs::path& model, bool run = false) {
  SessionSpec spec;
  spec.model_path = model.string();
  try {
    Session session(spec);
    if (run) session.run(random_inputs(session.inputs(), 1));
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << model << " loaded and ran";
  return Error("");
}

}  // namespace

TEST(OrtErrors, TheCauseIsShortAndTheKnownOnesHaveAHint) {
  const auto ir = describe_ort_failure(kIrVersion);
  expect_short(ir);
  EXPECT_EQ(ir.cause, "Unsupported model IR version: 99, max supported IR version: 13");
  EXPECT_NE(ir.hint.find("reads models up to IR version 13"), std::string::npos) << ir.hint;

  const auto opset = describe_ort_failure(kOpset);
  expect_short(opset);
  EXPECT_EQ(opset.cause, "the model uses opset 9999 of ai.onnx, newer than this ONNX Runtime supports (up to opset 26)");
  EXPECT_EQ(opset.hint, "this ONNX Runtime reads opsets up to 26; re-export with an older opset or use a newer ONNX Runtime");

  const auto cuda = describe_ort_failure(kCuda);
  expect_short(cuda);
  EXPECT_EQ(cuda.cause, "CUDA failure 999: unknown error ; GPU=1");
  EXPECT_NE(cuda.hint.find("ortfleet doctor"), std::string::npos);

  const auto op = describe_ort_failure(kUnknownOp);
  expect_short(op);
  EXPECT_EQ(op.cause, "invalid model: node \"conv7\" (Frobnicate): No Op registered for Frobnicate with domain_version of 17");
  EXPECT_NE(op.hint.find("no kernel for that operator"), std::string::npos);

  const auto external = describe_ort_failure(kAbsoluteExternal);
  expect_short(external);
  EXPECT_EQ(external.cause, "External data path validation failed for initializer: w. Error: Absolute path not allowed for external data location");
  EXPECT_NE(external.hint.find("absolute path"), std::string::npos);
  EXPECT_EQ(external.hint.find("keep it next to"), std::string::npos);

  const auto full = describe_ort_failure(kFullDisk);
  expect_short(full);
  EXPECT_EQ(full.cause, "Failed to write external initializers to file: \"/cache/models/m-01ad.onnx.data\"");

  // A node that failed while running, as ONNX Runtime 1.29's CPU EP says it of a 33 x 47 image.
  const auto run = describe_ort_failure(
      "Non-zero status code returned while running Add node. Name:'Add_8' Status Message: "
      "/onnxruntime_src/onnxruntime/core/providers/cpu/math/element_wise_ops.h:583 void "
      "onnxruntime::BroadcastIterator::Append(ptrdiff_t, ptrdiff_t) axis == 1 || axis == largest was false. Attempting to broadcast "
      "an axis by a dimension other than 1. 9 by 10");
  expect_short(run);
  EXPECT_EQ(run.cause, "node 'Add_8' (Add): dims of 9 and 10 do not broadcast (one must be 1, or both equal)");

  // A long text with no known cause is cut at a sentence; an unknown one gets no invented hint.
  std::string rambling = "The first sentence says what broke.";
  for (int i = 0; i < 40; ++i) rambling += " Then more words follow about things of no importance.";
  const auto cut = describe_ort_failure(rambling);
  EXPECT_LE(cut.cause.size(), 310u);
  EXPECT_EQ(cut.cause.back(), '.');
  EXPECT_TRUE(cut.hint.empty());
}

TEST(OrtErrors, BadModelsMadeHereGetShortErrorsWithHints) {
  const fs::path dir = test::scratch_dir() / "ort-errors";
  fs::create_directories(dir);

  // IR version 99: the writer's models begin with field 1 (ir_version) = 8; make it 99.
  {
    std::ostringstream bytes;
    small_model(17, true).write(bytes);
    std::string model = bytes.str();
    ASSERT_EQ(model.substr(0, 2), std::string("\x08\x08", 2));
    model[1] = 99;
    std::ofstream(dir / "ir99.onnx", std::ios::binary) << model;
  }
  const Error ir = session_error(dir / "ir99.onnx");
  EXPECT_NE(ir.what_failed().find("failed: Unsupported model IR version: 99, max supported IR version: "), std::string::npos)
      << ir.what_failed();
  EXPECT_NE(ir.hint().find("reads models up to IR version"), std::string::npos) << ir.hint();

  save(dir / "opset9999.onnx", small_model(9999, true));
  const Error opset = session_error(dir / "opset9999.onnx");
  EXPECT_NE(opset.what_failed().find("the model uses opset 9999 of ai.onnx, newer than this ONNX Runtime supports (up to opset "),
            std::string::npos)
      << opset.what_failed();
  EXPECT_NE(opset.hint().find("re-export with an older opset or use a newer ONNX Runtime"), std::string::npos) << opset.hint();

  save(dir / "no-outputs.onnx", small_model(17, false));
  const Error no_outputs = session_error(dir / "no-outputs.onnx", /*run=*/true);
  EXPECT_NE(std::string(no_outputs.what()).find("declares no outputs"), std::string::npos) << no_outputs.what();

  // Weights by absolute path: ONNX Runtime refuses to read outside the model's folder, and says so.
  const fs::path weights = dir / "w.bin";
  std::ofstream(weights, std::ios::binary) << std::string(16, '\0');
  auto absolute = onnx::external_tensor("w", DataType::float32, {1, 4}, {fs::absolute(weights).string(), 0, 16});
  save(dir / "absolute-weights.onnx", small_model(17, true, &absolute));
  const Error outside = session_error(dir / "absolute-weights.onnx");
  EXPECT_NE(outside.what_failed().find("Absolute path not allowed for external data location"), std::string::npos) << outside.what();
  EXPECT_NE(outside.hint().find("only from the model's folder"), std::string::npos) << outside.hint();

  for (const Error* e : {&ir, &opset, &no_outputs, &outside}) {
    EXPECT_EQ(e->what_failed().find(".cc:"), std::string::npos) << e->what_failed();
    EXPECT_LE(e->what_failed().size(), 400u) << e->what_failed();
  }
}

}  // namespace ortfleet::detail
