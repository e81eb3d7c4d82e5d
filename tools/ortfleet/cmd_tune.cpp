// ortfleet tune: which options start this model fastest, which serve it fastest, and what each costs.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "command.hpp"
#include "run_config_flags.hpp"
#include "flag_checks.hpp"
#include "interrupt.hpp"
#include "output.hpp"
#include "ortfleet/base/terminal_text.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/diagnostics/tune.hpp"

namespace ortfleet::cli {

namespace {

struct TuneFlags {
  double case_timeout = 0;  ///< --case-timeout; 0: sized to the model
  TargetFlags target;
  bool quick = false;
  int rounds = TuneOptions{}.rounds;
  double budget_s = 300;  ///< --budget; 0 once parsed when the rounds were asked for alone (budget_for)
  int steady_runs = 30;
  int transformers_to_disable = 3;
  double output_tolerance = 1e-3;
  std::string write_config;
  std::string write_serve_config;
  std::string export_json;
  std::string html;
  RunConfigFlags config;
};

void print_tune(const TuneReport& r, std::ostream& out) {
  out << "tune " << terminal_text(r.model) << " on " << r.device << ": " << count_text(static_cast<uint64_t>(r.rounds), "timed round")
      << " of each configuration, interleaved, each start in a fresh process (means; ready also ± σ)\n\n";
  Table t({"", "configuration", "ready", "first run", "p50", "p99", "memory"}, {false, false, true, true, true, true, true});
  for (size_t i = 0; i < r.results.size(); ++i) {
    const auto& x = r.results[i];
    std::string mark = x.pareto ? "*" : "";
    if (static_cast<int>(i) == r.start_fast) mark += "S";
    if (static_cast<int>(i) == r.serve_fast) mark += "F";
    if (!x.outputs_differ.empty()) mark += "!";
    if (!x.ok()) {
      t.add({mark, x.candidate.name, "failed"});
      continue;
    }
    const std::string ready = duration_text(x.ready_mean_ms) + (x.ready_ms.size() >= 2 ? " ± " + duration_text(x.ready_sigma_ms) : "");
    t.add({mark, x.candidate.name, ready, duration_text(x.first_inference_ms), duration_text(x.steady_p50_ms), duration_text(x.steady_p99_ms),
           bytes_text(x.memory_bytes)});
  }
  t.print(out);
  for (const auto& x : r.results) {
    if (!x.ok()) out << x.candidate.name << " failed: " << one_line(x.error) << "\n";
  }
  out << "\n* Pareto front (nothing else starts faster and runs faster); ready = exec until the first inference ends; p50 = the\n"
         "  mean of each round's p50; S and F: recommended, a gain over the first configuration beyond noise\n";
  if (std::any_of(r.results.begin(), r.results.end(), [](const TuneResult& x) { return !x.outputs_differ.empty(); })) {
    out << "! outputs differ from the first configuration's beyond the tolerance (--output-tolerance): never recommended\n";
  }
  // Each verdict's ratio is of the means in the table above.
  out << (r.start_fast >= 0 ? "S start fast: " : "start fast: ") << r.start_verdict << "\n";
  out << (r.serve_fast >= 0 ? "F serve fast: " : "serve fast: ") << r.serve_verdict << "\n";
  if (!r.shapes_advice.empty()) out << "shapes: " << terminal_text(r.shapes_advice) << "\n";
  for (const auto& finding : r.transformer_findings) out << "transformers: " << finding << "\n";
}

int run_tune_command(const TuneFlags& f, const Globals& g, const std::stop_token& stop) {
  TuneOptions o;
  o.stop = stop;
  o.model = f.target.model_path(g.quiet);
  o.timeout_s = case_timeout_s(o.model, f.case_timeout);
  o.device = f.target.device();
  o.base = f.config.resolve_for(o.model);
  say_what_runs(o.model, o.device.to_string(), o.base);
  o.quick = f.quick;
  o.rounds = f.rounds;
  o.budget_s = f.budget_s;
  o.steady_runs = f.steady_runs;
  o.transformers_to_disable = f.transformers_to_disable;
  o.output_tolerance = f.output_tolerance;
  o.ort_library = g.ort_lib;
  ProgressLine progress(!g.quiet);
  o.progress = [&](const std::string& s) { progress.update(s); };
  if (!g.quiet) {
    o.notice = [&progress](const std::string& s) {
      progress.clear();
      std::cerr << "tune: " << s << std::endl;
    };
  }
  const TuneReport r = run_tune(o);
  progress.clear();
  const bool any_ok = std::any_of(r.results.begin(), r.results.end(), [](const TuneResult& x) { return x.ok(); });
  // A config is written only for a gain beyond noise; otherwise the line says why none was.
  auto write = [&](const std::string& path, int index, const char* goal) {
    if (path.empty()) return;
    if (!any_ok) throw Error("no configuration succeeded, so there is no " + std::string(goal) + " config to write");
    if (index < 0) {
      if (!g.json) std::cout << "no " << goal << " configuration written to " << path << ": none beats the first configuration beyond noise\n";
      return;
    }
    RunConfig c = r.results[static_cast<size_t>(index)].candidate.config;
    c.name = goal;
    c.save(path);
    if (!g.json) std::cout << "wrote the " << goal << " configuration to " << path << " (use it with --config)\n";
  };
  const std::string result = stamped(r.to_json(), g, {o.device});
  if (!f.export_json.empty()) write_output_file(f.export_json, result);
  if (g.json) std::cout << result << std::endl;
  else print_tune(r, std::cout);
  write_html(f.html, result, g);
  write(f.write_config, r.start_fast, "start-fast");
  write(f.write_serve_config, r.serve_fast, "serve-fast");
  return any_ok ? 0 : 1;
}

}  // namespace

void register_tune(CLI::App& app, Globals& globals, Action& action) {
  auto* cmd = app.add_subcommand("tune", "Sweep session and CUDA options: start-up vs inference speed, and the best of each");
  auto f = std::make_shared<TuneFlags>();
  f->target.add_to(cmd, /*one_device=*/true);
  cmd->add_flag("--quick", f->quick, "Only the options that matter most (conv search, model cache, graph level)");
  checked_by_rule(cmd->add_option("--repeat", f->rounds,
                                  "Timed rounds, each a cold start of every configuration, interleaved: the spread that tells a gain from "
                                  "noise needs 2 or more"),
                  TuneOptions::kRoundsRule);
  add_budget_option(cmd, f->budget_s, kRoundsBudgetRule, " (at least 2)", "--repeat");
  checked_by_rule(cmd->add_option("--runs", f->steady_runs, "Inferences after the first, for p50/p99"), TuneOptions::kSteadyRunsRule);
  in_range(cmd->add_option("--disable-transformers", f->transformers_to_disable,
                           "Try disabling each of the N graph transformers that cost the start most, and all N together (0: none)"),
           {.lo = 0, .hi = 20});
  in_range(cmd->add_option("--output-tolerance", f->output_tolerance,
                           "How far outputs may move when a transformer is disabled: |a - b| <= T * (1 + |b|)"),
           {.lo = 0, .hi = 1, .whole = false});
  add_output_option(cmd, "--write-config", f->write_config, "Write the recommended start-fast configuration here");
  add_output_option(cmd, "--write-serve-config", f->write_serve_config, "Write the recommended serve-fast configuration here");
  add_output_option(cmd, "--export-json", f->export_json, "Also write the full results as JSON here");
  add_html_option(cmd, f->html);
  add_case_timeout_option(cmd, f->case_timeout);
  f->config.add_to(cmd);
  cmd->callback([cmd, &globals, &action, f] {
    const FlagChecks flags(*cmd);
    f->config.check(flags);
    f->budget_s = budget_for(*cmd, f->budget_s, "--repeat");
    if (flags.given("--output-tolerance") && f->transformers_to_disable == 0) {
      FlagChecks::refuse("--output-tolerance does nothing with --disable-transformers 0: only disabled transformers' outputs are compared");
    }
    action = [&globals, f] {
      refuse_overwriting_inputs({{"--write-config", f->write_config}, {"--write-serve-config", f->write_serve_config},
                                 {"--export-json", f->export_json}, {"--html", f->html}},
                                f->target, f->config);
      return stoppable("tune", [&](std::stop_token stop) { return run_tune_command(*f, globals, stop); });
    };
  });
}

}  // namespace ortfleet::cli
