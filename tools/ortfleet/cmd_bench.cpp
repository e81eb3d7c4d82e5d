// ortfleet bench: every start-up strategy in fresh processes, next to the onnxruntime Python package.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <sstream>

#include "command.hpp"
#include "run_config_flags.hpp"
#include "flag_checks.hpp"
#include "interrupt.hpp"
#include "output.hpp"
#include "ortfleet/base/terminal_text.hpp"
#include "ortfleet/diagnostics/bench.hpp"
#include "ortfleet/diagnostics/profile.hpp"
#include "ortfleet/diagnostics/throughput.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"

namespace ortfleet::cli {

namespace {

struct BenchFlags {
  double case_timeout = 0;  ///< --case-timeout; 0: sized to the model
  TargetFlags target;
  std::string strategies = "sequential,threads,processes,fleet";
  int runs = BenchOptions{}.runs;
  int warmup_rounds = 1;
  double budget_s = 300;  ///< --budget; 0 once parsed when the rounds were asked for alone (budget_for)
  bool no_anchors = false;
  bool no_pool = false;
  bool no_next_job = false;
  std::string python = "python3";
  std::string export_json;
  std::string export_markdown;
  std::string html;
  bool inference = false;
  double seconds = 5;
  std::string shape_mix;
  std::string shape_stream;
  int stream_count = 24;
  int stream_rounds = 3;
  uint64_t stream_seed = 1;
  std::string batch;
  std::string shape_order = "cycle";
  bool floor = false;
  RunConfigFlags config;
};

void export_to(const std::string& path, const std::string& text) {
  if (!path.empty()) write_output_file(path, text);
}

void print_report(const BenchReport& r, std::ostream& out) {
  out << "model " << terminal_text(r.model) << " on " << r.machine << " (ONNX Runtime " << r.ort_version << ")\n"
      << "wall time from exec until every session is created and has run one inference: " << r.runs << " timed round"
      << (r.runs == 1 ? "" : "s") << " of each row, in fresh processes, after " << r.untimed_starts << " untimed start"
      << (r.untimed_starts == 1 ? "" : "s") << "\n\n";
  const BenchTable table = bench_table(r);
  std::vector<bool> right(table.columns.size(), true);
  right[0] = false;
  Table t(table.columns, right);
  for (const auto& row : table.rows) t.add(row.cells);
  t.print(out);
  for (const auto& row : table.rows) {
    if (row.failed) out << "\n" << row.cells[0] << " failed: " << one_line(row.error, "--export-json");
  }
  if (!r.verdict.empty()) out << "\n\n" << terminal_text(r.verdict) << "\n";
  for (const auto& c : r.comparisons) out << "  " << terminal_text(c) << "\n";
  for (const auto& n : r.notes) out << "\n" << terminal_text(n) << "\n";
  for (const auto& s : r.skipped) out << "not run: " << terminal_text(s) << "\n";
}

void print_throughput(const ThroughputReport& r, std::ostream& out) {
  const bool mix = std::any_of(r.rows.begin(), r.rows.end(), [](const ThroughputRow& row) { return row.sessions > 0; });
  const bool stream = std::any_of(r.rows.begin(), r.rows.end(), [](const ThroughputRow& row) { return row.stream_ms > 0; });
  std::vector<std::string> headers = {"inference", "inferences/s", "p50", "p99", "speed-up"};
  if (mix) headers.insert(headers.end(), {"first call", "sessions", "memory"});
  if (stream) headers.push_back("stream");
  std::vector<bool> right(headers.size(), true);
  right[0] = false;
  Table t(headers, right);
  for (const auto& row : r.rows) {
    if (!row.error.empty()) {
      t.add({row.label, "failed"});
      continue;
    }
    std::vector<std::string> cells = {row.label, fmt::format("{:.1f}", row.inferences_per_s), duration_text(row.p50_ms),
                                      duration_text(row.p99_ms), row.speedup > 0 ? fmt::format("{:.2f}x", row.speedup) : "-"};
    if (mix) {
      cells.insert(cells.end(), {duration_text(row.first_call_ms), std::to_string(row.sessions),
                                 row.memory_bytes > 0 ? bytes_text(row.memory_bytes) : "-"});
    }
    if (stream) cells.push_back(row.stream_ms > 0 ? duration_text(row.stream_ms) : "-");
    t.add(cells);
  }
  t.print(out, "no rows were measured");
  for (const auto& row : r.rows) {
    if (!row.error.empty()) out << "\n" << row.label << " failed: " << one_line(row.error, "--export-json");
  }
  for (const auto& n : r.notes) out << "\n" << terminal_text(n);
  out << "\n";
}

/// A notice of the bench (its plan, how long it takes) as a line on stderr, under the progress line.
std::function<void(const std::string&)> notice_to_stderr(ProgressLine& progress) {
  return [&progress](const std::string& s) {
    progress.clear();
    std::cerr << "bench: " << s << std::endl;
  };
}

/// The flags of `bench` that do nothing together, refused before any work (FlagChecks): the inference
/// bench's flags without --inference, the start-up bench's with it, the stream's without a stream.
void check_bench_flags(const CLI::App& cmd, const BenchFlags& f) {
  const FlagChecks flags(cmd);
  f.config.check(flags);
  for (const char* flag : {"--seconds", "--shape-mix", "--batch", "--shape-stream"}) flags.needs(flag, "--inference");
  for (const char* flag : {"--stream-count", "--stream-rounds", "--stream-seed"}) flags.needs(flag, "--shape-stream");
  flags.needs("--shape-order", "--shape-mix");
  flags.excludes("--shape-mix", "--shape-stream", "the stream is measured instead");
  flags.excludes("--batch", "--shape-stream", "the stream is measured instead");
  flags.excludes("--batch", "--shape-mix", "the mix is measured instead");
  flags.excludes("--seconds", "--shape-stream", "the stream's length is --stream-count calls");
  if (f.inference) {
    for (const char* flag : {"--strategies", "--runs", "--warmup", "--budget", "--no-pool", "--floor", "--export-markdown", "--case-timeout"}) {
      flags.excludes(flag, "--inference", "it belongs to the start-up bench");
    }
  }
  flags.excludes("--python", "--no-anchors", "Python runs only the anchors");
}

int run_inference(const BenchFlags& f, const Globals& g, const std::string& model, const std::vector<Device>& devices,
                  ProgressLine& progress) {
  ThroughputOptions o;
  o.model = model;
  o.devices = devices;
  o.seconds = f.seconds;
  o.config = f.config.resolve_for(model);
  o.ort_library = g.ort_lib;
  if (!f.shape_mix.empty()) o.shape_mix = parse_batch_list(f.shape_mix);
  if (!f.batch.empty()) o.batches = parse_batch_list(f.batch);
  for (const auto* sizes : {&o.shape_mix, &o.batches}) {
    // Sizes of the first dim: the model must have it dynamic, which is checked before the first row.
    ShapeOptions batches;
    batches.batches = *sizes;
    if (!sizes->empty()) check_shapes_against_model(batches, model);
  }
  o.shape_stream = f.shape_stream;
  o.stream_count = f.stream_count;
  o.stream_rounds = f.stream_rounds;
  o.stream_seed = f.stream_seed;
  o.random_order = f.shape_order == "random";
  o.anchors = !f.no_anchors;
  o.python = f.python;
  o.progress = [&](const std::string& s) { progress.update(s); };
  if (!g.quiet) o.notice = notice_to_stderr(progress);
  const ThroughputReport r = run_throughput(o);
  progress.clear();
  const std::string result = stamped(r.to_json(), g, devices);
  export_to(f.export_json, result);
  if (g.json) std::cout << result << std::endl;
  else print_throughput(r, std::cout);
  write_html(f.html, result, g);
  for (const auto& row : r.rows) {
    if (!row.error.empty()) return kExitDeviceFailed;
  }
  return 0;
}

int run_bench_command(const BenchFlags& f, const Globals& g, const std::stop_token& stop) {
  ProgressLine progress(!g.quiet);
  const std::string model = f.target.model_path(g.quiet);
  const auto devices = f.target.device_list();
  say_what_runs(model, to_string(devices), f.config.resolve());
  if (f.inference) return run_inference(f, g, model, devices, progress);
  BenchOptions o;
  o.stop = stop;
  o.model = model;
  o.timeout_s = case_timeout_s(o.model, f.case_timeout);
  o.devices = devices;
  o.strategies.clear();
  std::stringstream list(f.strategies);
  for (std::string s; std::getline(list, s, ',');) o.strategies.push_back(parse_strategy(s));
  o.runs = f.runs;
  o.warmup_rounds = f.warmup_rounds;
  o.budget_s = f.budget_s;
  if (!g.quiet) o.notice = notice_to_stderr(progress);
  o.anchors = !f.no_anchors;
  o.pool_rows = !f.no_pool;
  o.next_job_rows = !f.no_next_job;
  o.python = f.python;
  o.ort_library = g.ort_lib;
  o.config = f.config.resolve_for(model);
  o.progress = [&](const std::string& s) { progress.update(s); };
  if (f.floor) {
    ProfileOptions p;
    p.model = model;
    p.device = devices.front();
    p.config = o.config;
    p.ort_library = g.ort_lib;
    p.shape_switch_seconds = 0;  // only the floor is wanted here
    p.stop = stop;
    progress.update("profiling one cold start on " + p.device.to_string() + " for its floor");
    o.floor_ms = run_profile(p).floor_ms;
  }
  const BenchReport r = run_bench(o);
  progress.clear();
  const std::string result = stamped(r.to_json(), g, devices);
  export_to(f.export_json, result);
  export_to(f.export_markdown, r.to_markdown());
  if (g.json) std::cout << result << std::endl;
  else print_report(r, std::cout);
  write_html(f.html, result, g);
  for (const auto& row : r.rows) {
    if (!row.ok()) return kExitDeviceFailed;
  }
  return 0;
}

}  // namespace

void register_bench(CLI::App& app, Globals& globals, Action& action) {
  auto* cmd = app.add_subcommand("bench", "Time every start-up strategy in fresh processes, next to onnxruntime's Python API");
  auto f = std::make_shared<BenchFlags>();
  f->target.add_to(cmd, /*one_device=*/false);
  cmd->add_option("--strategies", f->strategies, "Comma-separated: sequential,threads,processes,fleet");
  checked_by_rule(cmd->add_option("-r,--runs", f->runs, "Timed rounds (each case once per round, fresh process each)"), BenchOptions::kRunsRule);
  checked_by_rule(cmd->add_option("-w,--warmup", f->warmup_rounds,
                                  "Untimed rounds first: one start of ortfleet's (which makes the model cache's entry) and one of Python's "
                                  "each, for the page cache and imports"),
                  BenchOptions::kWarmupRoundsRule);
  add_budget_option(cmd, f->budget_s, kRoundsBudgetRule, " and each Python anchor gets at most a quarter of it", "--runs");
  cmd->add_flag("--no-anchors", f->no_anchors, "Skip the onnxruntime Python package runs");
  cmd->add_flag("--no-pool", f->no_pool, "Skip the rows on a warm worker pool (new session, and resident)");
  cmd->add_flag("--no-next-job", f->no_next_job,
                "Skip the next job's rows (a first job that leaves a warm pool, the next job right after it, jobs on the parked pool)");
  cmd->add_option("--python", f->python, "Python interpreter with onnxruntime and numpy, for the anchors");
  add_output_option(cmd, "--export-json", f->export_json, "Also write the full results as JSON here");
  add_output_option(cmd, "--export-markdown", f->export_markdown, "Also write the table as Markdown here");
  add_html_option(cmd, f->html);
  add_case_timeout_option(cmd, f->case_timeout);
  cmd->add_flag("--floor", f->floor, "Profile one cold start of the first device first, and show each 1-device row against its floor");
  cmd->add_flag("--inference", f->inference, "Measure inference throughput over the devices instead of start-up");
  in_range(cmd->add_option("--seconds", f->seconds, "With --inference: seconds per measurement"),
           {.lo = 0.1, .hi = 3600, .unit = "seconds", .whole = false});
  cmd->add_option("--shape-mix", f->shape_mix,
                  std::string("With --inference: batch sizes a stream of calls cycles through (1,2 or 1,8,32): one ONNX Runtime "
                              "session against shape-aware sessions, on the first device (the model needs a dynamic first dim)") +
                      kShapesAndSizesDoc);
  cmd->add_option("--batch", f->batch,
                  std::string("With --inference: batch sizes to measure the scaling rows at (1 or 1,32; the model needs a dynamic "
                              "first dim), a set of rows each, with host inputs and on GPUs also with inputs already on the device") +
                      kShapesAndSizesDoc);
  cmd->add_option("--shape-stream", f->shape_stream,
                  std::string("With --inference: a stream of calls whose shapes keep changing, x=1x3x[320:960:32]x[480,640,960] "
                              "(each call draws one size of each dim in brackets) or @FILE (a shape per line): one ONNX Runtime "
                              "session, the default shape policy, buckets (--buckets, else four sizes per varying dim), onnxruntime's "
                              "Python API") +
                      kShapesAndSizesDoc);
  in_range(cmd->add_option("--stream-count", f->stream_count, "With --shape-stream: calls in the stream"), {.lo = 1, .hi = 100000});
  in_range(cmd->add_option("--stream-rounds", f->stream_rounds,
                           "With --shape-stream: times the buckets row runs the stream, each followed by the steady calls of its "
                           "bucket shapes (their ratio is each round's: median, min and max)"),
           {.lo = 1, .hi = 100});
  in_range(cmd->add_option("--stream-seed", f->stream_seed, "With --shape-stream: the seed the shapes are drawn from"), {.lo = 0, .hi = 1e18});
  cmd->add_option("--shape-order", f->shape_order, "With --shape-mix: cycle through the sizes, or draw them at random")
      ->check(CLI::IsMember({"cycle", "random"}));
  f->config.add_to(cmd);
  cmd->callback([cmd, &globals, &action, f] {
    check_bench_flags(*cmd, *f);
    f->budget_s = budget_for(*cmd, f->budget_s, "--runs");
    action = [&globals, f] {
      refuse_overwriting_inputs({{"--export-json", f->export_json}, {"--export-markdown", f->export_markdown}, {"--html", f->html}}, f->target,
                                f->config);
      // Inference rows take no stop token: Ctrl-C ends them as it ends any program.
      if (f->inference) return run_bench_command(*f, globals, {});
      return stoppable("bench", [&](std::stop_token stop) { return run_bench_command(*f, globals, stop); });
    };
  });
}

}  // namespace ortfleet::cli
