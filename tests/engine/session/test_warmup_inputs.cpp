#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "engine/files/npy_file.hpp"
#include "engine/cache/output_compare.hpp"
#include "engine/session/warmup_inputs.hpp"
#include "ortfleet/engine/shape_grammar.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/options.hpp"
#include "ortfleet/engine/session.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
Tensor make(const std::string& name, ElementType type, std::vector<int64_t> shape, const std::vector<double>& values) {
  Tensor t = Tensor::host_copy(name, type, std::move(shape), nullptr);
  for (size_t i = 0; i < values.size(); ++i) {
    switch (type) {
      case ElementType::float32: t.values<float>()[i] = static_cast<float>(values[i]); break;
      case ElementType::int64: t.values<int64_t>()[i] = static_cast<int64_t>(values[i]); break;
      default: t.values<uint8_t>()[i] = static_cast<uint8_t>(values[i]); break;
    }
  }
  return t;
}

fs::path scratch(const std::string& name) {
  const fs::path dir = test::scratch_dir() / "warmup-inputs";
  fs::create_directories(dir);
  return dir / name;
}

const std::vector<TensorSpec> kAudioModel = {{"input", ElementType::float32, {-1, -1}, {"batch", "samples"}},
                                             {"sr", ElementType::int64, {}, {}},
                                             {"state", ElementType::float32, {2, -1, 4}, {"", "batch", ""}}};
}  // namespace

TEST(NpyFile, AnNpzWrittenIsReadBackWithNamesTypesShapesAndValues) {
  const std::string path = scratch("round-trip.npz").string();
  detail::write_npz(path, {make("x", ElementType::float32, {2, 3}, {1, 2, 3, 4, 5, 6.5}), make("sr", ElementType::int64, {}, {16000}),
                           make("mask", ElementType::boolean, {5}, {1, 0, 1, 1, 0})});
  const auto back = detail::read_npz(path);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].name, "x");
  EXPECT_EQ(back[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back[0].values<float>()[5], 6.5f);
  EXPECT_EQ(back[1].name, "sr");
  EXPECT_EQ(back[1].type, ElementType::int64);
  EXPECT_TRUE(back[1].shape.empty());
  EXPECT_EQ(back[1].values<int64_t>()[0], 16000);
  EXPECT_EQ(back[2].type, ElementType::boolean);
  EXPECT_EQ(back[2].values<uint8_t>()[3], 1);
}

TEST(NpyFile, DamagedOrForeignFilesAreRefusedWithTheReason) {
  const std::string npy = scratch("one.npy").string();
  { std::ofstream(npy, std::ios::binary) << detail::npy_bytes(make("a", ElementType::float32, {4}, {1, 2, 3, 4})); }
  EXPECT_EQ(detail::read_array_file(npy, "only").front().name, "only");
  fs::resize_file(npy, fs::file_size(npy) - 3);
  try {
    detail::read_npy(npy, "a");
    FAIL() << "a cut-short array was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what_failed()).find("needs 16 bytes"), std::string::npos) << e.what();
  }
  const std::string text = scratch("text.npz").string();
  { std::ofstream(text) << "PK\x03\x04 but not a zip file at all"; }
  EXPECT_THROW(detail::read_npz(text), Error);
  const std::string fortran = scratch("fortran.npy").string();
  std::string bytes = detail::npy_bytes(make("a", ElementType::float32, {2, 2}, {1, 2, 3, 4}));
  bytes.replace(bytes.find("False"), 5, "True ");
  { std::ofstream(fortran, std::ios::binary) << bytes; }
  EXPECT_THROW(detail::read_npy(fortran, "a"), Error);
}

// An .npz with no arrays (numpy.savez(FILE)) is called that, not "not a numpy array file"; a negative
// dim in an .npy header is refused (it used to be read as positive).
TEST(NpyFile, AnEmptyNpzAndANegativeDimAreNamedForWhatTheyAre) {
  const std::string empty = scratch("empty.npz").string();
  detail::write_npz(empty, {});
  for (const auto& read : {std::function<void()>([&] { detail::read_array_file(empty, "x"); }), std::function<void()>([&] { detail::read_npz(empty); })}) {
    try {
      read();
      FAIL() << "an empty .npz was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.what_failed(), empty + " is an .npz file with no arrays in it");
      EXPECT_NE(e.hint().find("numpy.savez(FILE, input_name=array"), std::string::npos) << e.hint();
    }
  }
  std::string bytes = detail::npy_bytes(make("a", ElementType::float32, {2, 2}, {1, 2, 3, 4}));
  ASSERT_NE(bytes.find("(2, 2,)"), std::string::npos);
  bytes.replace(bytes.find("(2, 2,)"), 7, "(2,-2,)");
  const std::string negative = scratch("negative.npy").string();
  { std::ofstream(negative, std::ios::binary) << bytes; }
  const std::string negative_error = test::error_from([&] { detail::read_npy(negative, "a"); }).what();
  EXPECT_NE(negative_error.find("its shape (2,-2,) has a negative dim (-2)"), std::string::npos) << negative_error;
  // A dim too large for int64 is refused as an ortfleet::Error, not std::out_of_range (the header's
  // padding makes room for it).
  std::string huge = detail::npy_bytes(make("a", ElementType::float32, {4}, {1, 2, 3, 4}));
  const std::string dims = "(99999999999999999999,), }";
  huge.replace(huge.find("(4, ), }"), dims.size(), dims);
  { std::ofstream(negative, std::ios::binary) << huge; }
  const std::string huge_error = test::error_from([&] { detail::read_npy(negative, "a"); }).what();
  EXPECT_NE(huge_error.find("(99999999999999999999)"), std::string::npos) << huge_error;
}

TEST(WarmupInputs, FileArraysAreFedAsTheyAreAndSharedDimNamesFollowThem) {
  const std::string path = scratch("audio.npz").string();
  detail::write_npz(path, {make("input", ElementType::float32, {3, 7}, std::vector<double>(21, 0.25)), make("sr", ElementType::int64, {}, {16000})});
  WarmupOptions options;
  options.inputs_file = path;
  options.input_ranges["state"] = {0, 0};
  const detail::WarmupInputSource source(options, kAudioModel, {}, 1);
  const InputShapes shapes = source.default_shapes();
  EXPECT_EQ(shapes.at("input"), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(shapes.at("state"), (std::vector<int64_t>{2, 3, 4}));  // "batch" follows the file's input
  const auto made = source.make(shapes, 1);
  ASSERT_EQ(made.tensors.size(), 3u);
  EXPECT_EQ(made.tensors[0].values<float>()[20], 0.25f);
  EXPECT_EQ(made.tensors[1].values<int64_t>()[0], 16000);
  for (int64_t i = 0; i < made.tensors[2].element_count(); ++i) EXPECT_EQ(made.tensors[2].values<float>()[i], 0.0f);
  ASSERT_EQ(made.made_up.size(), 1u);  // only the state was generated
  EXPECT_NE(made.made_up.front().find("'state'"), std::string::npos) << made.made_up.front();
  EXPECT_NE(made.made_up.front().find("value 0"), std::string::npos) << made.made_up.front();
}

TEST(WarmupInputs, RangesApplyToGeneratedInputsOfEveryTypeAndMadeUpDimsAreNamed) {
  WarmupOptions options;
  options.input_ranges["sr"] = {8000, 8000};
  options.input_ranges["input"] = {-32768, 32767};
  const detail::WarmupInputSource source(options, kAudioModel, {}, 1);
  const auto made = source.make(source.default_shapes(), 3);
  EXPECT_EQ(made.tensors[1].values<int64_t>()[0], 8000);
  ASSERT_EQ(made.made_up.size(), 3u);
  EXPECT_NE(made.made_up[0].find("dynamic dims 0, 1 chosen"), std::string::npos) << made.made_up[0];
  EXPECT_NE(made.made_up[0].find("values in [-32768, 32767]"), std::string::npos) << made.made_up[0];
  const auto wide = source.make({{"input", {1, 4000}}, {"sr", {}}, {"state", {2, 1, 4}}}, 3);
  float largest = 0;
  for (int64_t i = 0; i < 4000; ++i) largest = std::max(largest, std::abs(wide.tensors[0].values<float>()[i]));
  EXPECT_GT(largest, 1000.0f);  // int16-scale audio, not [-1, 1)
  EXPECT_LE(largest, 32768.0f);
}

TEST(WarmupInputs, AFileThatDoesNotFitTheModelIsRefusedNamingTheArray) {
  auto refused = [](const std::vector<Tensor>& arrays, const std::string& expected) {
    const std::string path = scratch("bad.npz").string();
    detail::write_npz(path, arrays);
    WarmupOptions options;
    options.inputs_file = path;
    try {
      detail::WarmupInputSource source(options, kAudioModel, {}, 1);
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refused({make("nosuch", ElementType::float32, {1, 2}, {})}, "'nosuch', which is not an input");
  refused({make("sr", ElementType::float32, {}, {})}, "is float32, and the model takes int64");
  refused({make("state", ElementType::float32, {3, 1, 4}, {})}, "warm-up input 'state'");
  WarmupOptions unknown_range;
  unknown_range.input_ranges["nosuch"] = {0, 1};
  EXPECT_THROW(detail::WarmupInputSource(unknown_range, kAudioModel, {}, 1), Error);
}

// Arrays a front end wrote into a file of its own (Python's warmup_inputs dict) are named as what the
// user gave, not as that file: the message named a temporary file the user never made.
TEST(WarmupInputs, ArraysAFrontEndWroteAreNamedAsWhatTheUserGave) {
  const std::string path = scratch("from-a-dict.npz").string();
  detail::write_npz(path, {make("sr", ElementType::float32, {}, {})});
  WarmupOptions options;
  options.inputs_file = path;
  options.inputs_origin = "the warmup_inputs dict";
  const std::string text = test::error_of([&] { detail::WarmupInputSource(options, kAudioModel, {}, 1); });
  EXPECT_NE(text.find("warm-up input 'sr' in the warmup_inputs dict is float32, and the model takes int64"), std::string::npos) << text;
  EXPECT_EQ(text.find(path), std::string::npos) << text;
}

// Every setting a model can contradict, checked from its file before any session: one call the command
// line and the Python module both make. With none of those settings given, the model is not read.
TEST(CheckConfigAgainstModel, RefusesWhatTheModelContradictsAndReadsNothingOtherwise) {
  EXPECT_NO_THROW(check_config_against_model(RunConfig{}, "/nonexistent/model.onnx"));
  RunConfig buckets;
  buckets.shapes.buckets = {parse_buckets("input.1=64,128")};
  EXPECT_NE(test::error_of([&] { check_config_against_model(buckets, test::mlp_model()); }).find("is fixed by the model"), std::string::npos);
  RunConfig ranges;
  ranges.warmup.input_ranges["inptu"] = {0, 1};
  EXPECT_NE(test::error_of([&] { check_config_against_model(ranges, test::mlp_model()); }).find("input range 'inptu' (`warmup.input_ranges`) is not an input"),
            std::string::npos);
  RunConfig arrays;
  arrays.warmup.inputs_file = scratch("mlp-float64.npz").string();
  Tensor doubles = Tensor::host_copy("input", ElementType::float64, {1, 64}, nullptr);
  detail::write_npz(arrays.warmup.inputs_file, {doubles});
  EXPECT_NE(test::error_of([&] { check_config_against_model(arrays, test::mlp_model()); }).find("is float64, and the model takes float32"),
            std::string::npos);
  RunConfig shared;
  shared.shapes.declared = {{{"input_ids", {1, 10}}, {"attention_mask", {1, 12}}}};
  EXPECT_NE(test::error_of([&] { check_config_against_model(shared, test::masked_transformer_model()); })
                .find("share dim 'sequence' but were given 10 and 12"),
            std::string::npos);
  shared.shapes.declared = {{{"input_ids", {1, 12}}, {"attention_mask", {1, 12}}}};
  EXPECT_NO_THROW(check_config_against_model(shared, test::masked_transformer_model()));
}

// A custom-op library that is missing, a folder or not a shared library was found only by each worker as
// it made its session, after the start had begun on every device (issue 53).
TEST(CheckConfigAgainstModel, RefusesACustomOpLibraryThatCannotBeLoaded) {
  const auto error_with = [](const std::string& library) {
    RunConfig config;
    config.session.custom_op_libraries = {library};
    return test::error_of([&] { check_config_against_model(config, "/nonexistent/model.onnx"); });
  };
  EXPECT_NE(error_with("/nonexistent/libops.so").find("the custom-op library /nonexistent/libops.so cannot be read: No such file"), std::string::npos);
  const auto folder = scratch("custom-ops-folder");
  std::filesystem::create_directories(folder);
  EXPECT_NE(error_with(folder.string()).find("is not a file (it is a folder)"), std::string::npos) << error_with(folder.string());
  const auto text = scratch("libnot-a-library.so");
  std::ofstream(text) << "not a shared library";
  EXPECT_NE(error_with(text.string()).find("is not a shared library (no ELF header)"), std::string::npos);
  RunConfig real;
  real.session.custom_op_libraries = {test::bin("libortfleet_test_crash_ops.so")};
  EXPECT_NO_THROW(check_config_against_model(real, test::mlp_model()));
}

// A range the input's type cannot hold was accepted, and the generated values wrapped or saturated.
TEST(WarmupInputs, ARangeBeyondWhatTheInputsTypeHoldsIsRefusedNamingBoth) {
  const std::vector<TensorSpec> inputs = {{"pixels", ElementType::uint8, {1, 4}, {"", ""}},
                                          {"flag", ElementType::boolean, {1}, {""}},
                                          {"ids", ElementType::int32, {1, 4}, {"", ""}},
                                          {"x", ElementType::float32, {1, 4}, {"", ""}}};
  const auto error_for = [&](const std::string& name, ValueRange range) {
    WarmupOptions options;
    options.input_ranges[name] = range;
    try {
      detail::WarmupInputSource source(options, inputs, {}, 1);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string pixels = error_for("pixels", {0, 300});
  EXPECT_NE(pixels.find("input range pixels=0:300 (`warmup.input_ranges`) is beyond what uint8 input 'pixels' holds (0 to 255)"),
            std::string::npos)
      << pixels;
  EXPECT_NE(pixels.find("Give a range within 0:255"), std::string::npos) << pixels;
  EXPECT_NE(error_for("flag", {0, 2}).find("bool input 'flag' holds (0 to 1)"), std::string::npos);
  EXPECT_NE(error_for("ids", {-1, 3e9}).find("int32 input 'ids' holds (-2147483648 to 2147483647)"), std::string::npos);
  EXPECT_EQ(error_for("pixels", {0, 255}), "(accepted)");
  EXPECT_EQ(error_for("x", {-1e30, 1e30}), "(accepted)");
}

// Two arrays that give one symbolic dim two sizes failed deep inside the graph, at the Add of the two:
// they are refused naming both inputs and the dim.
TEST(WarmupInputs, ArraysThatDisagreeOnASharedDimAreRefusedNamingBoth) {
  const std::vector<TensorSpec> inputs = {{"input_ids", ElementType::int64, {1, -1}, {"", "sequence"}},
                                          {"attention_mask", ElementType::int64, {1, -1}, {"", "sequence"}}};
  const std::string path = scratch("disagree.npz").string();
  detail::write_npz(path, {make("input_ids", ElementType::int64, {1, 8}, {}), make("attention_mask", ElementType::int64, {1, 6}, {})});
  WarmupOptions options;
  options.inputs_file = path;
  try {
    detail::WarmupInputSource source(options, inputs, {}, 1);
    FAIL() << "arrays that disagree on 'sequence' were accepted";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("warm-up inputs in " + path + ": inputs 'input_ids' [1, 8] and 'attention_mask' [1, 6] share dim "
                        "'sequence' but were given 8 and 6: they must be equal"),
              std::string::npos)
        << text;
  }
  detail::write_npz(path, {make("input_ids", ElementType::int64, {1, 8}, {}), make("attention_mask", ElementType::int64, {1, 8}, {})});
  EXPECT_NO_THROW(detail::WarmupInputSource(options, inputs, {}, 1));
}

TEST(InputRange, ConstantsRangesAndMistakes) {
  EXPECT_EQ(parse_input_range("sr=16000").second, (ValueRange{16000, 16000}));
  EXPECT_EQ(parse_input_range("ids=0:30521").second, (ValueRange{0, 30521}));
  EXPECT_EQ(parse_input_range("x=-1.5:2").second, (ValueRange{-1.5, 2}));
  EXPECT_THROW(parse_input_range("sr"), Error);
  EXPECT_THROW(parse_input_range("sr=abc"), Error);
  EXPECT_THROW(parse_input_range("x=2:1"), Error);
  RunConfig config;
  config.warmup.inputs_file = "/data/warmup.npz";
  config.warmup.input_ranges["sr"] = {16000, 16000};
  EXPECT_EQ(RunConfig::from_json(config.to_json(), "test"), config);
}

TEST(OutputCompare, FloatNoiseIsAcceptedAndRealDifferencesAreNamed) {
  const Tensor want = make("y", ElementType::float32, {4}, {1.0, -200.0, 3.0, 0.0});
  EXPECT_EQ(detail::output_difference(want, make("y", ElementType::float32, {4}, {1.0001, -200.02, 3.0, 0.00001})), "");
  EXPECT_NE(detail::output_difference(want, make("y", ElementType::float32, {4}, {1.0, -200.0, 3.5, 0.0})).find("element 2"), std::string::npos);
  EXPECT_NE(detail::output_difference(want, make("y", ElementType::float32, {2, 2}, {1, -200, 3, 0})).find("shape"), std::string::npos);
  const Tensor ids = make("ids", ElementType::int64, {3}, {1, 2, 3});
  EXPECT_EQ(detail::output_difference(ids, make("ids", ElementType::int64, {3}, {1, 2, 3})), "");
  EXPECT_NE(detail::output_difference(ids, make("ids", ElementType::int64, {3}, {1, 2, 4})), "");
}

// The failure of a model on made-up inputs says which were made up and how to give real ones.
TEST(WarmupInputs, AModelThatRejectsMadeUpInputsGetsAnErrorNamingThem) {
  SessionSpec spec;
  spec.model_path = test::small_transformer();
  spec.config.warmup.input_ranges["input_ids"] = {1000, 1000};  // beyond its 100-word vocabulary: Gather fails
  Session session(spec);
  try {
    session.warm_up();
    FAIL() << "token ids outside the vocabulary were accepted";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("inputs ortfleet made up"), std::string::npos) << text;
    EXPECT_NE(text.find("'input_ids'"), std::string::npos) << text;
    EXPECT_NE(text.find("`warmup.inputs=FILE.npz`"), std::string::npos) << text;
  }
}

}  // namespace ortfleet
