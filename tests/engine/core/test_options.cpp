#include <gtest/gtest.h>

#include <map>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

namespace {
std::map<std::string, std::string> as_map(const CudaOptions& o) {
  const auto v = o.provider_options();
  return {v.begin(), v.end()};
}

std::string error_of(const std::string& text) {
  try {
    RunConfig::from_json(text, "test.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(Options, CudaOptionsMapToOnnxRuntimeKeys) {
  CudaOptions o;
  auto m = as_map(o);
  EXPECT_EQ(m["cudnn_conv_algo_search"], "EXHAUSTIVE");
  EXPECT_EQ(m["cudnn_conv_use_max_workspace"], "1");
  EXPECT_EQ(m["enable_cuda_graph"], "0");
  EXPECT_EQ(m["use_tf32"], "1");
  EXPECT_EQ(m.count("gpu_mem_limit"), 0u);
  EXPECT_EQ(m.count("user_compute_stream"), 0u);

  o.conv_algo_search = ConvAlgoSearch::heuristic;
  o.gpu_mem_limit = 1ull << 30;
  o.cuda_graph = true;
  o.tf32 = false;
  o.arena_extend = ArenaExtendStrategy::same_as_requested;
  o.user_compute_stream = 0x1234;
  o.extra["cudnn_conv1d_pad_to_nc1d"] = "1";
  o.extra["use_tf32"] = "1";  // extra keys win over typed fields
  m = as_map(o);
  EXPECT_EQ(m["cudnn_conv_algo_search"], "HEURISTIC");
  EXPECT_EQ(m["gpu_mem_limit"], "1073741824");
  EXPECT_EQ(m["enable_cuda_graph"], "1");
  EXPECT_EQ(m["arena_extend_strategy"], "kSameAsRequested");
  EXPECT_EQ(m["has_user_compute_stream"], "1");
  EXPECT_EQ(m["user_compute_stream"], std::to_string(0x1234));
  EXPECT_EQ(m["cudnn_conv1d_pad_to_nc1d"], "1");
  EXPECT_EQ(m["use_tf32"], "1");
}

TEST(Options, ConfigRoundTripsThroughJson) {
  RunConfig c;
  c.name = "start-fast";
  c.session.graph_optimization = GraphOptimization::basic;
  c.session.intra_op_threads = 3;
  c.session.thread_spinning = false;
  c.session.optimized_model_cache = true;
  c.session.cuda_module_loading = "LAZY";
  c.session.cuda_max_connections = 2;
  c.session.config_entries["session.disable_prepacking"] = "1";
  c.cuda.conv_algo_search = ConvAlgoSearch::default_algo;
  c.cuda.gpu_mem_limit = 123456789;
  c.cuda.prefer_nhwc = true;
  c.cuda.extra["sdpa_kernel"] = "2";
  EXPECT_EQ(RunConfig::from_json(c.to_json(), "x"), c);
  EXPECT_EQ(RunConfig::from_json(RunConfig{}.to_json(), "x"), RunConfig{});
}

TEST(Options, MissingSectionsKeepDefaults) {
  const RunConfig c = RunConfig::from_json(R"({"ortfleet_config": 1, "cuda": {"conv_algo_search": "heuristic"}})", "x");
  EXPECT_EQ(c.cuda.conv_algo_search, ConvAlgoSearch::heuristic);
  EXPECT_EQ(c.session, SessionOptions{});
}

TEST(Options, MalformedConfigsSayWhichKeyAndWhy) {
  EXPECT_NE(error_of("not json").find("invalid config test.json: not JSON"), std::string::npos);
  EXPECT_NE(error_of("[1,2]").find("must be an object"), std::string::npos);
  EXPECT_NE(error_of("{}").find("'ortfleet_config' must be 1"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 2})").find("'ortfleet_config' must be 1"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": {"conv_algo_search": "FASTEST"}})").find("'cuda.conv_algo_search' must be one of EXHAUSTIVE"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"intra_op_threads": "four"}})").find("'session.intra_op_threads' must be a whole number"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"intra_op_threads": -2}})").find("must not be negative"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": {"tf32": "yes"}})").find("'cuda.tf32' must be true or false"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": {"tf_32": true}})").find("'cuda.tf_32' is not a known key"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "sessions": {}})").find("'config.sessions' is not a known key"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"cuda_module_loading": "SOMETIMES"}})").find("cuda_module_loading"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": {"gpu_mem_limit": -1}})").find("'cuda.gpu_mem_limit'"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": []})").find("'cuda' must be an object"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"cuda_max_connections": 99}})").find("must be 0 to 32"), std::string::npos);
}

// ONNX Runtime reads its on/off session config entries as "1" or anything else: "true" (or true
// written as a string) turned the option off without a word. Such values are refused, naming the value.
TEST(Options, SessionConfigEntriesOfTheWrongTypeAreRefused) {
  const std::string flag = error_of(R"({"ortfleet_config": 1, "session": {"config_entries": {"session.disable_prepacking": "true"}}})");
  EXPECT_NE(flag.find("'session.config_entries.session.disable_prepacking' must be \"0\" or \"1\" (got \"true\")"), std::string::npos) << flag;
  const std::string count = error_of(R"({"ortfleet_config": 1, "session": {"config_entries": {"session.intra_op.spin_duration_us": "fast"}}})");
  EXPECT_NE(count.find("must be a whole number of 0 or more (got \"fast\")"), std::string::npos) << count;
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"config_entries": {"session.disable_prepacking": true}}})")
                .find("must be an object of strings"),
            std::string::npos);
  EXPECT_EQ(session_config_entry_problem("session.disable_prepacking", "1"), "");
  EXPECT_EQ(session_config_entry_problem("optimization.disable_specified_optimizers", "ConstantFolding"), "");  // not a flag
  EXPECT_EQ(session_config_entry_problem("vendor.unknown_key", "anything"), "");  // ONNX Runtime's to judge
}

TEST(Options, NumbersAreNeverNarrowedSilently) {
  auto session = [](const std::string& body) { return error_of(R"({"ortfleet_config": 1, "session": {)" + body + "}}"); };
  // Too large for an int: once reported as "must not be negative", or a bad_alloc.
  EXPECT_NE(session(R"("intra_op_threads": 2147483648)").find("'session.intra_op_threads' must be a whole number of threads (2147483648 is out of range)"),
            std::string::npos);
  EXPECT_NE(session(R"("intra_op_threads": 99999999999)").find("out of range"), std::string::npos);
  EXPECT_NE(session(R"("intra_op_threads": 1e30)").find("'session.intra_op_threads' must be a whole number"), std::string::npos);
  // Fractions and booleans are not whole numbers (2.7 became 2, true became 1).
  EXPECT_NE(session(R"("intra_op_threads": 2.7)").find("must be a whole number"), std::string::npos);
  EXPECT_NE(session(R"("intra_op_threads": true)").find("must be a whole number"), std::string::npos);
  // Each key is named for itself (inter_op_threads was reported as intra_op_threads).
  EXPECT_NE(session(R"("inter_op_threads": -1)").find("'session.inter_op_threads' must not be negative"), std::string::npos);
  // 4294967296 wrapped to 0 and passed the 0..32 check.
  EXPECT_NE(session(R"("cuda_max_connections": 4294967296)").find("'session.cuda_max_connections'"), std::string::npos);
  // More threads than the machine could use: 100000 ran it out of memory.
  EXPECT_NE(session(R"("intra_op_threads": 100000)").find("'session.intra_op_threads' must be 0 to"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1.9})").find("'config.ortfleet_config' must be the format number 1"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": {"tf32": 1}})").find("'cuda.tf32' must be true or false"), std::string::npos);
  // A number JSON cannot hold: the file is named (once a raw parser error).
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"intra_op_threads": 1e400}})").find("invalid config test.json"), std::string::npos);
}

TEST(Options, NullableFieldsTakeNullOrTheirType) {
  const RunConfig c = RunConfig::from_json(R"({"ortfleet_config": 1, "session": {"optimized_model_cache": null}, "cuda": {"gpu_mem_limit": 1024}})", "t");
  EXPECT_FALSE(c.session.optimized_model_cache.has_value());
  EXPECT_EQ(c.cuda.gpu_mem_limit, 1024u);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"optimized_model_cache": 1}})").find("'session.optimized_model_cache' must be true, false or null"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": {"gpu_mem_limit": 1.5}})").find("'cuda.gpu_mem_limit'"), std::string::npos);
}

TEST(Options, LoadReportsAMissingFile) { EXPECT_THROW(RunConfig::load("/nonexistent/config.json"), Error); }

TEST(Options, SummaryNamesOnlyWhatDiffersFromDefaults) {
  EXPECT_EQ(RunConfig{}.summary(), "defaults");
  RunConfig c;
  c.cuda.conv_algo_search = ConvAlgoSearch::heuristic;
  c.session.optimized_model_cache = true;
  EXPECT_EQ(c.summary(), "conv=HEURISTIC model_cache");
}

TEST(Options, ParsersAcceptKnownSpellingsOnly) {
  EXPECT_EQ(parse_conv_algo_search("Exhaustive"), ConvAlgoSearch::exhaustive);
  EXPECT_EQ(parse_graph_optimization("DISABLED"), GraphOptimization::disabled);
  EXPECT_THROW(parse_conv_algo_search("fast"), Error);
  EXPECT_THROW(parse_graph_optimization("max"), Error);
}

}  // namespace ortfleet
