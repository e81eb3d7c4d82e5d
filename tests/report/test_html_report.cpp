#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/timeline.hpp"
#include "ortfleet/report/html_report.hpp"
#include "test_support.hpp"

namespace ortfleet {

namespace fs = std::filesystem;
using test::scratch_dir;
using test::ScopedEnv;

namespace {

std::string error_of(const std::string& text, const std::string& source) {
  try {
    parse_result(text, source);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string bench_json(const std::string& label) {
  return nlohmann::json{{"ortfleet_bench", 1},
                        {"model", "m.onnx"},
                        {"rows", {{{"label", label}, {"family", "ortfleet"}, {"devices", 1}, {"median_ms", 12.5}}}}}
      .dump();
}

/// The JSON the page carries, read back out of its <script type="application/json"> element.
nlohmann::json embedded_results(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"ortfleet-results\">";
  const size_t begin = page.find(open);
  EXPECT_NE(begin, std::string::npos);
  const size_t end = page.find("</script>", begin);
  return nlohmann::json::parse(page.substr(begin + open.size(), end - begin - open.size()));
}

}  // namespace

TEST(HtmlReport, TellsTheKindOfEachResult) {
  EXPECT_EQ(parse_result(bench_json("fleet"), "a.json").kind, "bench");
  EXPECT_EQ(parse_result(R"({"ortfleet_profile": 1, "phases": []})", "p.json").kind, "profile");
  EXPECT_EQ(parse_result(R"({"ortfleet_tune": 1, "results": []})", "t.json").kind, "tune");
  EXPECT_EQ(parse_result(R"({"ortfleet_start": 1, "devices": []})", "s.json").kind, "start");
  EXPECT_EQ(parse_result(R"({"ortfleet_throughput": 1, "rows": []})", "i.json").kind, "throughput");
  EXPECT_EQ(parse_result(Timeline(0).to_json(), "l.json").kind, "timeline");  // what start --timeline writes
}

TEST(HtmlReport, RejectsWhatItCannotDrawNamingTheFile) {
  // JSON from another tool (hyperfine's), a cut-off file, a version from the future, a result without its list.
  EXPECT_NE(error_of(R"({"results": [{"command": "sleep 1", "mean": 1.0}]})", "hf.json").find("hf.json is not an ortfleet result"),
            std::string::npos);
  const std::string whole = bench_json("fleet");
  EXPECT_NE(error_of(whole.substr(0, whole.size() / 2), "cut.json").find("cut.json is not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_bench": 2, "rows": []})", "new.json").find("new.json is an ortfleet bench result of version 2"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_bench": "1", "rows": []})", "str.json").find("of version \"1\""), std::string::npos);
  EXPECT_NE(error_of(R"({"ortfleet_tune": 1})", "t.json").find("t.json says it is an ortfleet tune result but has no \"results\" list"),
            std::string::npos);
  EXPECT_NE(error_of("[1, 2]", "list.json").find("list.json is not an ortfleet result"), std::string::npos);
  EXPECT_NE(error_of("", "empty.json").find("empty.json is not valid JSON"), std::string::npos);
  EXPECT_EQ(error_of("", "empty.json").find("json.exception"), std::string::npos) << error_of("", "empty.json");
  try {
    read_result_file((scratch_dir() / "no-such-result.json").string());
    FAIL() << "a missing file must not read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-result.json does not exist"), std::string::npos) << e.what();
  }
}

TEST(HtmlReport, StampSaysWhereAResultCameFromAndKeepsItsKeys) {
  const auto stamped = nlohmann::json::parse(stamp_result(bench_json("fleet"), "ortfleet bench m.onnx", {Device::cpu()}, ""));
  EXPECT_EQ(stamped["ortfleet_bench"], 1);
  EXPECT_EQ(stamped["rows"][0]["label"], "fleet");
  EXPECT_EQ(stamped["command_line"], "ortfleet bench m.onnx");
  EXPECT_EQ(stamped["date"].get<std::string>().size(), std::string("2026-01-01T00:00:00Z").size());
  EXPECT_NE(stamped["machine"].get<std::string>().find("CPU"), std::string::npos);
  EXPECT_FALSE(stamped["onnxruntime"].get<std::string>().empty());
  // What the result says itself is not overwritten.
  const auto own = nlohmann::json::parse(stamp_result(R"({"ortfleet_tune": 1, "results": [], "machine": "the lab box"})", "x", {}, ""));
  EXPECT_EQ(own["machine"], "the lab box");
}

TEST(HtmlReport, PageHoldsTheLibraryAndTheDataAndNothingThatEndsItsScripts) {
  // A label that would close the data's <script> element if it were inlined as it is.
  const std::string label = "fleet</script><script>alert(1)</script>";
  const std::string page = render_html_report({parse_result(bench_json(label), "b.json")});
  std::ifstream library(find_chart_library());
  std::string first_line;
  std::getline(library, first_line);
  EXPECT_NE(page.find(first_line.substr(0, 200)), std::string::npos) << "the charting library is inlined";
  EXPECT_EQ(page.find("alert(1)</script>"), std::string::npos);
  const auto results = embedded_results(page);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["kind"], "bench");
  EXPECT_EQ(results[0]["source"], "b.json");
  EXPECT_EQ(results[0]["result"]["rows"][0]["label"], label);
  EXPECT_EQ(page.find("{{"), std::string::npos) << "every template field is filled";
  // Whatever the page would fetch is refused by its own policy (the browser test sees any attempt).
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos);
}

// "fleet from Python" is ortfleet's own fleet, started from Python: drawn in a colour of ortfleet's,
// not in the one the legend gives onnxruntime's Python API, also from results written before it had
// a family of its own.
TEST(HtmlReport, TheFleetFromPythonIsDrawnAsOrtfleetsNotAsOnnxruntimesPythonApi) {
  const auto row = [](const char* label, const char* family, const char* strategy) {
    return nlohmann::json{{"label", label}, {"family", family}, {"strategy", strategy}, {"devices", 2}, {"median_ms", 12.5}};
  };
  const std::string bench = nlohmann::json{{"ortfleet_bench", 1},
                                           {"model", "m.onnx"},
                                           {"rows", {row("fleet from Python", "onnxruntime-python", "python-ortfleet"),
                                                     row("python threads", "onnxruntime-python", "python-threads")}}}
                                .dump();
  const std::string page = render_html_report({parse_result(bench, "b.json")});
  const auto rows = embedded_results(page)[0]["result"]["rows"];
  EXPECT_EQ(rows[0]["family"], "ortfleet-python");
  EXPECT_EQ(rows[1]["family"], "onnxruntime-python");
  // The page's colours: one for the fleet from Python, other than onnxruntime's.
  const auto colour_of = [&](const std::string& family) {
    const size_t map = page.find("const familyColor = {");
    const size_t at = page.find("'" + family + "': '", map);
    return at == std::string::npos ? std::string() : page.substr(at + family.size() + 5, 7);
  };
  EXPECT_FALSE(colour_of("ortfleet-python").empty());
  EXPECT_NE(colour_of("ortfleet-python"), colour_of("onnxruntime-python"));
}

TEST(HtmlReport, MissingLibraryNamesTheFetchScript) {
  const fs::path empty = scratch_dir() / "no-web-assets";
  fs::create_directories(empty);
  ScopedEnv web("ORTFLEET_WEB_DIR", empty.string());
  try {
    render_html_report({parse_result(bench_json("fleet"), "b.json")});
    FAIL() << "no library, no page";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scripts/fetch-web-assets.sh"), std::string::npos) << e.what();
  }
}

}  // namespace ortfleet
