// ortfleet profile: where one cold start of one session spends its time, and what to do about it.
#include <fmt/format.h>

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
#include "ortfleet/diagnostics/profile.hpp"

namespace ortfleet::cli {

namespace {

struct ProfileFlags {
  double case_timeout = 0;  ///< --case-timeout; 0: sized to the model
  TargetFlags target;
  int steady_runs = 20;
  std::string trace;
  std::string keep_dir;
  std::string html;
  double shape_switch_seconds = 1;
  bool no_fleet = false;
  RunConfigFlags config;
};

/// "CUDAExecutionProvider" as "CUDA": the provider column stays narrow.
std::string short_provider(const std::string& provider) {
  const std::string suffix = "ExecutionProvider";
  return provider.ends_with(suffix) ? provider.substr(0, provider.size() - suffix.size()) : provider;
}

void print_profile(const ProfileReport& r, std::ostream& out) {
  out << fmt::format("profile of {} on {} ({})\n", terminal_text(r.model), r.device, r.config.summary());
  out << fmt::format("cold start: {} from exec to the end of the first inference; {:.0f}% attributed to named phases\n\n",
                     duration_text(r.wall_ms), r.attributed_share() * 100);
  // The start's own phases in order, each step of one indented under it.
  Table phases({"phase", "time", "share", "detail"}, {false, true, true, false});
  for (const auto& p : r.phases) {
    phases.add({(p.parent.empty() ? "" : "  ") + p.label, duration_text(p.ms), fmt::format("{:.1f}%", p.share * 100), p.detail});
  }
  phases.add({"(unattributed)", duration_text(r.wall_ms - r.attributed_ms), fmt::format("{:.1f}%", (1 - r.attributed_share()) * 100), ""});
  phases.print(out);
  out << "\ntop costs you can change, and what to do\n";
  for (size_t i = 0; i < r.top_costs.size(); ++i) out << "  " << i + 1 << ". " << terminal_text(r.top_costs[i]) << "\n";
  if (!r.dynamic_dims.empty()) {
    std::string dims;
    for (const auto& d : r.dynamic_dims) dims += (dims.empty() ? "" : ", ") + d;
    out << "\ndynamic dims: " << terminal_text(dims) << "\n  " << terminal_text(r.shapes_advice) << "\n";
  }
  if (!r.transformers.empty()) {
    out << "\ngraph transformers (largest first):";
    for (size_t i = 0; i < r.transformers.size() && i < 5; ++i) {
      out << fmt::format(" {} {}{}", r.transformers[i].first, duration_text(r.transformers[i].second), i + 1 < std::min<size_t>(5, r.transformers.size()) ? "," : "");
    }
    out << "\n";
  }
  if (!r.nodes.empty()) {
    out << "\nfirst inference vs later ones, per node (largest extra first)\n";
    Table nodes({"node", "op", "provider", "first", "later"}, {false, false, false, true, true});
    for (size_t i = 0; i < r.nodes.size() && i < 8; ++i) {
      const auto& n = r.nodes[i];
      nodes.add({n.node, n.op, short_provider(n.provider), fmt::format("{:.2f} ms", n.first_ms), fmt::format("{:.2f} ms", n.steady_ms)});
    }
    nodes.print(out);
  }
  out << "\nplacement:";
  for (const auto& [ep, n] : r.placement) out << " " << ep << " " << n << " nodes;";
  out << " " << r.memcpy_nodes << " Memcpy nodes";
  if (!r.cpu_fallback.empty()) {
    out << "; on the CPU:";
    for (const auto& op : r.cpu_fallback) out << " " << op;
  }
  out << fmt::format("\nsteady inference: p50 {}, p99 {}\n", duration_text(r.steady_p50_ms), duration_text(r.steady_p99_ms));
  if (r.shape_switch.measured()) {
    out << fmt::format("shape switch (batch 1 and 2 alternating through one ONNX Runtime session): p50 {} a call against {} "
                       "for each batch alone: {} per switch\n",
                       duration_text(r.shape_switch.call_ms), duration_text(r.shape_switch.steady_call_ms), duration_text(r.shape_switch.cost_ms));
  }
  if (r.fleet_driver.measured()) {
    out << fmt::format("\nfleet on {} (one start, in a fresh process): {}\n", r.fleet_devices, r.fleet_driver.summary());
  } else if (!r.fleet_error.empty()) {
    out << fmt::format("\nthe fleet on {} failed, so the driver's share is not known: {}\n", r.fleet_devices, one_line(r.fleet_error));
  }
  if (r.floor.empty()) return;
  out << fmt::format("\nfloor of this start on this machine: {} (measured {}, {:.2f}x the floor)\n", duration_text(r.floor_ms),
                     duration_text(r.wall_ms), r.floor_ratio());
  Table floor({"term", "floor", "measured", "ratio", "floor from"}, {false, true, true, true, false});
  for (const auto& t : r.floor) {
    floor.add({t.label, duration_text(t.floor_ms), duration_text(t.measured_ms), t.floor_ms > 0 ? fmt::format("{:.2f}x", t.ratio()) : "-", t.basis});
  }
  floor.print(out);
}

int run_profile_command(const ProfileFlags& f, const Globals& g, const std::stop_token& stop) {
  ProfileOptions o;
  o.stop = stop;
  o.model = f.target.model_path(g.quiet);
  o.timeout_s = case_timeout_s(o.model, f.case_timeout);
  o.device = f.target.device();
  o.config = f.config.resolve_for(o.model);
  say_what_runs(o.model, o.device.to_string(), o.config);
  o.steady_runs = f.steady_runs;
  o.ort_library = g.ort_lib;
  o.work_dir = f.keep_dir;
  o.shape_switch_seconds = f.shape_switch_seconds;
  o.fleet = !f.no_fleet;
  ProgressLine progress(!g.quiet);
  o.progress = [&](const std::string& s) { progress.update(s); };
  const ProfileReport r = run_profile(o);
  progress.clear();
  if (!f.trace.empty()) write_output_file(f.trace, r.timeline.to_chrome_trace());
  const std::string result = stamped(r.to_json(), g, {o.device});
  if (g.json) std::cout << result << std::endl;
  else {
    print_profile(r, std::cout);
    if (!f.trace.empty()) std::cout << "trace (ours and ONNX Runtime's, one clock): " << f.trace << " - open it in ui.perfetto.dev\n";
  }
  write_html(f.html, result, g);
  return 0;
}

}  // namespace

void register_profile(CLI::App& app, Globals& globals, Action& action) {
  auto* cmd = app.add_subcommand("profile", "Break one cold start into phases: what costs the most, and the fix");
  auto f = std::make_shared<ProfileFlags>();
  f->target.add_to(cmd, /*one_device=*/true);
  checked_by_rule(cmd->add_option("--runs", f->steady_runs, "Inferences after the first, for steady-state times"), ProfileOptions::kSteadyRunsRule);
  add_output_option(cmd, "--trace", f->trace, "Write a Chrome/Perfetto trace with ortfleet's and ONNX Runtime's events");
  add_output_option(cmd, "--keep", f->keep_dir, "Keep ONNX Runtime's profile and log in this folder", /*folder=*/true);
  add_html_option(cmd, f->html);
  add_case_timeout_option(cmd, f->case_timeout);
  in_range(cmd->add_option("--shape-switch-seconds", f->shape_switch_seconds,
                           "Seconds per stream measuring what a batch switch costs one ONNX Runtime session (dynamic batch only; 0 skips)"),
           {.lo = 0, .hi = 600, .unit = "seconds", .whole = false});
  cmd->add_flag("--no-fleet", f->no_fleet,
                "On a machine of more than one GPU, skip the one start of a fleet on all of them that says what the driver's start "
                "(cuInit and a context per worker) costs it");
  f->config.add_to(cmd);
  cmd->callback([cmd, &globals, &action, f] {
    f->config.check(FlagChecks(*cmd));
    action = [&globals, f] {
      refuse_overwriting_inputs({{"--trace", f->trace}, {"--html", f->html}}, f->target, f->config);
      return stoppable("profile", [&](std::stop_token stop) { return run_profile_command(*f, globals, stop); });
    };
  });
}

}  // namespace ortfleet::cli
