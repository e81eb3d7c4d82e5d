#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/config_fields.hpp"
#include "ortfleet/engine/options.hpp"
#include "test_support.hpp"

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
  EXPECT_NE(error_of("not json").find("invalid config test.json: not JSON (parse error at line 1, column 2"), std::string::npos)
      << "nlohmann's own prefix ([json.exception.parse_error.101]) is no part of a user's error: " << error_of("not json");
  EXPECT_NE(error_of("[1,2]").find("must be an object"), std::string::npos);
  EXPECT_NE(error_of("{}").find("'ortfleet_config' must be 1"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 2})").find("'ortfleet_config' must be 1"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": {"conv_algo_search": "FASTEST"}})").find("'cuda.conv_algo_search' must be one of EXHAUSTIVE"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"intra_op_threads": "four"}})").find("'session.intra_op_threads' must be a whole number"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"intra_op_threads": -2}})").find("-2 is out of range"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": {"tf32": "yes"}})").find("'cuda.tf32' must be true or false"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": {"tf_32": true}})").find("'cuda.tf_32' is not a known key"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "sessions": {}})").find("'config.sessions' is not a known key"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"cuda_module_loading": "SOMETIMES"}})").find("cuda_module_loading"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": {"gpu_mem_limit": -1}})").find("'cuda.gpu_mem_limit'"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "cuda": []})").find("'cuda' must be an object"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "session": {"cuda_max_connections": 99}})").find("99 is out of range: give a whole number from 0 to 32"),
            std::string::npos);
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
  EXPECT_NE(session(R"("intra_op_threads": 2147483648)").find("'session.intra_op_threads' must be a whole number (2147483648 is out of range)"),
            std::string::npos);
  EXPECT_NE(session(R"("intra_op_threads": 99999999999)").find("out of range"), std::string::npos);
  EXPECT_NE(session(R"("intra_op_threads": 1e30)").find("'session.intra_op_threads' must be a whole number"), std::string::npos);
  // Fractions and booleans are not whole numbers (2.7 became 2, true became 1).
  EXPECT_NE(session(R"("intra_op_threads": 2.7)").find("must be a whole number"), std::string::npos);
  EXPECT_NE(session(R"("intra_op_threads": true)").find("must be a whole number"), std::string::npos);
  // Each key is named for itself (inter_op_threads was reported as intra_op_threads).
  EXPECT_NE(session(R"("inter_op_threads": -1)").find("'session.inter_op_threads' -1 is out of range: give a whole number from 0 to 64"), std::string::npos);
  // 4294967296 wrapped to 0 and passed the 0..32 check.
  EXPECT_NE(session(R"("cuda_max_connections": 4294967296)").find("'session.cuda_max_connections'"), std::string::npos);
  // More threads than the machine could use: 100000 ran it out of memory.
  EXPECT_NE(session(R"("intra_op_threads": 100000)").find("'session.intra_op_threads' 100000 is out of range"), std::string::npos);
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

namespace {
/// Values of `row` its check takes, as a flag's text: its bounds, each of its words, a path.
std::vector<std::string> good_texts(const SettingRow& row) {
  const ValueRule& v = row.values;
  switch (v.kind) {
    case ValueKind::on_off: return {"1", "0"};
    case ValueKind::whole: return {number_words(v.lo), number_words(v.hi)};
    case ValueKind::number: return {number_words(v.lo), "0.5", number_words(v.hi)};
    case ValueKind::choice: return value_words(v);
    case ValueKind::path: return {"/some/where"};
    default: return {};
  }
}
}  // namespace

// The walk over the settings table's config keys: each is written by to_json and read back by from_json;
// each key of one value is set as a flag or a keyword sets it (its field), every value its row takes
// survives the file, and one it does not is refused on both paths, naming the key.
TEST(Options, EveryConfigKeyOfTheTableIsWrittenReadAndCheckedByItsRow) {
  const auto written = nlohmann::json::parse(RunConfig{}.to_json());
  size_t fields = 0;
  for (const SettingRow& row : all_settings()) {
    if (row.scope != SettingScope::config) continue;
    const std::string section = detail::section_of(row.id);
    const std::string key = detail::key_in_section(row.id);
    EXPECT_TRUE(written.contains(section) && written.at(section).contains(key)) << row.name << " is not a key to_json writes";
    const detail::ConfigField* field = detail::config_field(row.id);
    if (field == nullptr) continue;  // a key of several values, read by its own grammar (tested with it)
    ++fields;
    for (const std::string& text : good_texts(row)) {
      RunConfig c;
      c.shapes.batches = {1};  // so that pad_batch has a batch to pad to
      detail::set_field_from_text(*field, c, text);
      EXPECT_EQ(RunConfig::from_json(c.to_json(), "x"), c) << row.name << "=" << text;
    }
    if (row.values.kind == ValueKind::whole || row.values.kind == ValueKind::number) {
      const double beyond = highest_value(row.values) + 1;
      RunConfig c;
      EXPECT_EQ(test::error_of([&] { detail::set_field(*field, c, beyond); }),
                "`" + std::string(row.name) + "=" + number_words(beyond) + "` is out of range: give " + allowed_values(row.values));
      const std::string file = fmt::format(R"({{"ortfleet_config": 1, "{}": {{"{}": {}}}}})", section, key, beyond);
      EXPECT_NE(error_of(file).find("'" + std::string(row.name) + "' " + number_words(beyond) + " is out of range: give " + allowed_values(row.values)),
                std::string::npos)
          << error_of(file);
    }
    if (row.values.kind == ValueKind::choice) {
      const std::string file = fmt::format(R"({{"ortfleet_config": 1, "{}": {{"{}": "no-such"}}}})", section, key);
      EXPECT_NE(error_of(file).find("'" + std::string(row.name) + "' must be one of " + row.values.words), std::string::npos) << error_of(file);
    }
  }
  EXPECT_EQ(fields, detail::config_fields().size()) << "every field is a config key of the table";
  EXPECT_EQ(setting_row(Setting::max_shape_sessions).values.hi, kMaxShapeSessions);
}

// docs/config.md lists, section by section, exactly the table's config keys, each with its default as the
// file writes it.
TEST(Options, TheConfigPageListsEveryKeyOfTheTableWithItsDefault) {
  const std::string page = test::read_all(std::filesystem::path(ORTFLEET_TEST_SOURCE_DIR) / "docs" / "config.md");
  const auto defaults = nlohmann::json::parse(RunConfig{}.to_json());
  const std::regex heading("\n## `([a-z_]+)`\n");
  const std::regex row("\n\\| `([a-z0-9_]+)` \\| `([^`]*)` \\|");
  std::map<std::string, std::map<std::string, std::string>> listed;  // section -> key -> default
  std::vector<std::pair<std::string, size_t>> sections;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), heading); it != std::sregex_iterator(); ++it) {
    sections.emplace_back((*it)[1], static_cast<size_t>(it->position()));
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    const size_t end = i + 1 < sections.size() ? sections[i + 1].second : page.size();
    const std::string body = page.substr(sections[i].second, end - sections[i].second);
    EXPECT_EQ(listed.count(sections[i].first), 0u) << "docs/config.md has the section " << sections[i].first << " twice";
    for (auto it = std::sregex_iterator(body.begin(), body.end(), row); it != std::sregex_iterator(); ++it) listed[sections[i].first][(*it)[1]] = (*it)[2];
  }
  std::map<std::string, std::map<std::string, std::string>> table;
  for (const SettingRow& r : all_settings()) {
    if (r.scope != SettingScope::config) continue;
    const std::string section = detail::section_of(r.id), key = detail::key_in_section(r.id);
    table[section][key] = defaults.at(section).at(key).dump();
  }
  EXPECT_EQ(listed, table);
}

// The providers a config stacks in front of a device's own, each with its options: read back as written,
// and left out of a file that stacks none (which is then written as before the section existed).
TEST(Options, TheProvidersAConfigStacksSurviveTheFile) {
  EXPECT_FALSE(nlohmann::json::parse(RunConfig{}.to_json()).contains("providers"));
  RunConfig c;
  c.providers["tensorrt"] = {{"trt_fp16_enable", "1"}, {"trt_max_workspace_size", "2147483648"}};
  c.providers["other"] = {};
  EXPECT_EQ(RunConfig::from_json(c.to_json(), "x"), c);
  EXPECT_NE(error_of(R"({"ortfleet_config": 1, "providers": {"tensorrt": {"trt_fp16_enable": 1}}})")
                .find("'config.providers' must be an object of execution provider names, each an object of strings"),
            std::string::npos);
  EXPECT_EQ(c.summary(), "provider=other provider=tensorrt");
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
