// ortfleet doctor: is this machine ready to start ONNX Runtime sessions on its GPUs, and what slows them?
#include <fmt/format.h>

#include <iostream>

#include "command.hpp"
#include "run_config_flags.hpp"
#include "flag_checks.hpp"
#include "interrupt.hpp"
#include "output.hpp"
#include "ortfleet/base/terminal_text.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/diagnostics/crash_locator.hpp"
#include "ortfleet/diagnostics/doctor.hpp"

namespace ortfleet::cli {

namespace {

const char* marker(Verdict v) {
  switch (v) {
    case Verdict::ok: return "[ ok ]";
    case Verdict::info: return "[info]";
    case Verdict::warn: return "[warn]";
    case Verdict::fail: return "[FAIL]";
  }
  return "[ ?? ]";
}

void print_human(const DoctorReport& r) {
  std::cout << "ONNX Runtime\n";
  if (r.runtime) {
    std::cout << "  " << r.runtime->version << "  " << r.runtime->library_path << "  (" << r.runtime->source << ")\n";
    std::cout << "  providers built in: ";
    for (size_t i = 0; i < r.runtime->providers.size(); ++i) std::cout << (i ? ", " : "") << r.runtime->providers[i];
    std::cout << "\n";
  } else {
    std::cout << "  not loaded: " << r.runtime_error << "\n";
  }
  std::cout << "\nGPUs\n";
  if (r.driver.gpus.empty()) {
    std::cout << "  none (" << (r.driver.error.empty() ? "the driver sees no GPU" : r.driver.error) << ")\n";
  } else {
    Table gpus({"device", "name", "memory", "arch", "PCI bus", "MIG", "EP code"});
    for (const auto& g : r.driver.gpus) {
      std::string code = "?";
      for (const auto& a : r.architectures) {
        if (a.gpu == g.ordinal) code = a.support;
      }
      gpus.add({"cuda:" + std::to_string(g.ordinal), g.name, fmt::format("{:.0f} GiB", static_cast<double>(g.total_memory) / (1ull << 30)),
                g.architecture(), g.pci_bus_id, g.mig_enabled ? (*g.mig_enabled ? "on" : "off") : "?", code});
    }
    gpus.print(std::cout);
    std::cout << "  driver " << r.driver.driver_version << " (CUDA " << r.driver.driver_api_version / 1000 << "."
              << r.driver.driver_api_version % 1000 / 10 << "), cuInit took " << duration_text(r.driver.init_ms) << "\n";
  }
  std::cout << "\nCUDA execution provider\n";
  if (r.cuda_ep) {
    std::cout << "  " << r.cuda_ep->path << "  (" << r.cuda_ep->source << ")\n";
    if (r.provider) std::cout << "  attached through: " << (r.provider->path.empty() ? "none" : r.provider->path) << "\n";
  } else {
    std::cout << "  not found\n";
  }
  if (!r.libraries.empty()) {
    Table libs({"library", "version", "resolved to"});
    for (const auto& l : r.libraries) libs.add({l.name, l.found ? l.version : "-", l.found ? l.path : "NOT FOUND (" + l.why + ")"});
    libs.print(std::cout);
  }
  if (r.model) {
    const ModelCheck& m = *r.model;
    std::cout << "\nModel\n  " << terminal_text(m.model) << " on " << m.device << ": "
              << (!m.file_error.empty() ? "not a model ortfleet can start"
                  : m.started          ? "started, ready " + duration_text(m.ready_ms) + " after exec"
                  : m.crashed          ? "crashed ONNX Runtime"
                                       : "did not start")
              << "\n";
  }
  std::cout << "\nFindings\n";
  for (const auto& f : r.findings) {
    std::cout << "  " << marker(f.verdict) << " " << terminal_text(f.summary) << "\n";
    if (!f.fix.empty() && f.verdict != Verdict::ok) std::cout << "         fix: " << terminal_text(f.fix) << "\n";
  }
}

void print_location(const CrashLocation& r) {
  std::cout << "model " << terminal_text(r.model) << " on " << r.device << ": " << terminal_text(r.how) << "\n";
  if (r.node) {
    const CrashNode& n = *r.node;
    std::cout << "\nthe first node whose execution crashes (node " << n.index + 1 << " of " << r.nodes << " in execution order):\n";
    std::cout << "  name      " << terminal_text(n.name) << "\n";
    std::cout << "  op        " << (n.domain.empty() ? "" : n.domain + ".") << n.op_type << " (opset " << n.opset << ")\n";
    for (const auto& a : n.attributes) std::cout << "  attribute " << terminal_text(a) << "\n";
    for (const auto& v : n.inputs) std::cout << "  input     " << terminal_text(v.name) << "  " << (v.type.empty() ? "?" : v.type) << " " << v.shape << "\n";
    for (const auto& v : n.outputs) std::cout << "  output    " << terminal_text(v.name) << (v.type.empty() ? "" : "  " + v.type) << "\n";
    std::cout << "  CPU EP    " << n.on_cpu << "\n";
    std::cout << "\nsmallest model that crashes: " << terminal_text(r.smallest_model) << "\n";
    if (!r.smallest_inputs.empty()) std::cout << "its inputs:                  " << r.smallest_inputs << "\n";
    std::cout << "reproduce it:                " << terminal_text(r.reproduce) << "\n";
  }
  if (!r.workarounds.empty()) std::cout << "\nwork-arounds, each in a fresh process on " << r.device << ", outputs against the CPU EP's:\n";
  for (const auto& w : r.workarounds) std::cout << "  " << (w.works ? "works   " : "no      ") << terminal_text(w.what) << ": " << terminal_text(w.outcome) << "\n";
  if (!r.workaround_config.empty()) {
    const auto& w = r.workarounds.back();
    std::cout << "\nstart it with the work-around: ortfleet start " << terminal_text(r.model) << " --devices " << r.device << " --config " << r.workaround_config
              << "\n  (its config entry: --session-config '" << w.config_key << "=" << w.config_value.substr(0, 120)
              << (w.config_value.size() > 120 ? "...'" : "'") << "; a model whose nodes are assigned by name runs without the model cache)\n";
  }
  for (const auto& note : r.notes) std::cout << "note: " << terminal_text(note) << "\n";
  std::cout << fmt::format("\n{} tries in fresh processes, {:.1f} s\n", r.tries, r.seconds);
}

}  // namespace

void register_doctor(CLI::App& app, Globals& globals, Action& action) {
  auto* cmd = app.add_subcommand("doctor", "Check ONNX Runtime, GPUs, the CUDA EP and its libraries, and the environment; with a model, "
                                           "also start it once on the device in a fresh process; with --locate-crash, find the node "
                                           "that crashes ONNX Runtime");
  struct Flags {
    bool no_register = false;
    bool locate = false;
    std::string out_dir;
    double try_timeout = 120;
    std::string crash_step;
    TargetFlags target;
    RunConfigFlags run;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_flag("--no-register", f->no_register, "Do not load and register the CUDA EP (skips CUDA initialisation)");
  f->target.add_to(cmd, /*one_device=*/true);
  cmd->get_option("model")->description(
      "A model to start once on the device, in a fresh process, after the machine's checks (default: none, the machine only)");
  cmd->add_flag("--locate-crash", f->locate,
                "Find the first node of MODEL whose execution crashes ONNX Runtime, bisecting its graph in fresh processes; writes the "
                "smallest model that crashes, with its inputs, for a bug report");
  add_output_option(cmd, "--out", f->out_dir, "Where --locate-crash writes its models (default: <model>-crash in this folder)", /*folder=*/true);
  in_range(cmd->add_option("--try-timeout", f->try_timeout, "--locate-crash: seconds one try may take before it counts as a hang"), time_limit());
  cmd->add_option("--crash-step", f->crash_step, "(internal) one try of --locate-crash, in this process")->group("");
  f->run.add_to(cmd);
  cmd->callback([cmd, &globals, &action, f] {
    // The device and the session flags are the model's (its start, or its crash search); --out and
    // --try-timeout are --locate-crash's. The checks of the machine take none.
    const FlagChecks flags(*cmd);
    if (!flags.given("--crash-step")) {
      for (const std::string& flag : {std::string("--out"), std::string("--try-timeout")}) {
        if (flags.given(flag) && !flags.given("--locate-crash")) {
          FlagChecks::refuse(flag + " does nothing without --locate-crash: add --locate-crash, or leave " + flag + " out");
        }
      }
      for (const std::string& flag : {std::string("--device"), f->run.first_given(flags)}) {
        if (!flag.empty() && flags.given(flag) && !flags.given("model")) {
          FlagChecks::refuse(flag + " does nothing without a model: give the model to start (ortfleet doctor MODEL " + flag +
                             " ...), or leave " + flag + " out");
        }
      }
    }
    flags.excludes("--no-register", "--locate-crash", "the crash search registers what the model needs");
    f->run.check(flags);
    action = [&globals, f] {
      if (!f->crash_step.empty()) {
        run_crash_step(f->target.model, f->target.device(), f->run.resolve(), f->crash_step);
        return 0;
      }
      if (f->locate) {
        if (f->target.model.empty()) throw Error("--locate-crash needs the model that crashes", "ortfleet doctor MODEL --locate-crash");
        CrashLocateOptions o;
        o.model = f->target.model;
        o.device = f->target.device();
        o.config = f->run.resolve();
        o.out_dir = f->out_dir;
        o.try_timeout_s = f->try_timeout;
        if (!globals.quiet) o.progress = [](const std::string& line) { std::cerr << "  " << line << std::endl; };
        const CrashLocation r = locate_crash(o);
        if (globals.json) std::cout << r.to_json() << std::endl;
        else print_location(r);
        return r.node ? 0 : 1;
      }
      DoctorOptions options;
      options.ort_library = globals.ort_lib;
      options.register_cuda_ep = !f->no_register;
      const auto check = [&](std::stop_token stop) {
        options.stop = std::move(stop);
        const DoctorReport report = run_doctor(options);
        if (globals.json) std::cout << report.to_json() << std::endl;
        else print_human(report);
        return report.has_failures() ? 1 : 0;
      };
      if (f->target.model.empty()) return check({});
      // The model's start runs in a child process: Ctrl-C stops it in order, nothing of it left behind.
      options.model = f->target.model;
      options.device = f->target.device();
      options.config = f->run.resolve_for(options.model);
      return stoppable("doctor", check);
    };
  });
}

}  // namespace ortfleet::cli
