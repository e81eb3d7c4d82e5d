// ortfleet report: the JSON results of bench, profile, tune and start, drawn as one HTML page that
// opens offline (the charting library and the data are inside it).
#include <iostream>
#include <memory>

#include "command.hpp"
#include "output.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/report/html_report.hpp"

namespace ortfleet::cli {

namespace {

struct ReportFlags {
  std::vector<std::string> results;
  std::string output = "report.html";
};

int run_report_command(const ReportFlags& f, const Globals& g) {
  std::vector<std::pair<std::string, std::string>> inputs;
  for (const auto& path : f.results) inputs.emplace_back("a result it draws", path);
  refuse_overwriting({{"-o", f.output}}, inputs);
  std::vector<ResultDocument> documents;
  for (const auto& path : f.results) documents.push_back(read_result_file(path));
  write_html_report(f.output, documents);
  if (g.json) {
    // What was written, for a program: the page and the results it draws, each with its kind.
    nlohmann::json drawn = nlohmann::json::array();
    for (const auto& d : documents) drawn.push_back({{"source", d.source}, {"kind", d.kind}});
    print_json({{"html", f.output}, {"results", drawn}});
  } else if (!g.quiet) {
    std::string kinds;
    for (const auto& d : documents) kinds += (kinds.empty() ? "" : ", ") + d.kind;
    std::cout << "wrote " << f.output << " (" << kinds << ")\n";
  }
  return 0;
}

}  // namespace

void register_report(CLI::App& app, Globals& globals, Action& action) {
  auto* cmd = app.add_subcommand("report", "Draw JSON results of bench, profile, tune and start as one HTML page that opens offline");
  auto f = std::make_shared<ReportFlags>();
  cmd->add_option("results", f->results, "JSON files from --json, --export-json or --timeline")->required();
  add_output_option(cmd, "-o,--output", f->output, "The HTML file to write")->capture_default_str();
  cmd->callback([&globals, &action, f] { action = [&globals, f] { return run_report_command(*f, globals); }; });
}

}  // namespace ortfleet::cli
