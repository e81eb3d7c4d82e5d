// ortfleet doctor: is this machine ready to start ONNX Runtime sessions on its GPUs, and what slows them?
#include <fmt/format.h>

#include <iostream>

#include "cli.hpp"
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
              << r.driver.driver_api_version % 1000 / 10 << "), cuInit took " << format_ms(r.driver.init_ms) << "\n";
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
  std::cout << "\nFindings\n";
  for (const auto& f : r.findings) {
    std::cout << "  " << marker(f.verdict) << " " << f.summary << "\n";
    if (!f.fix.empty() && f.verdict != Verdict::ok) std::cout << "         fix: " << f.fix << "\n";
  }
}

}  // namespace

void register_doctor(CLI::App& app, Globals& globals, Action& action) {
  auto* cmd = app.add_subcommand("doctor", "Check ONNX Runtime, GPUs, the CUDA EP and its libraries, and the environment");
  auto no_register = std::make_shared<bool>(false);
  cmd->add_flag("--no-register", *no_register, "Do not load and register the CUDA EP (skips CUDA initialisation)");
  cmd->callback([&globals, &action, no_register] {
    action = [&globals, no_register] {
      DoctorOptions options;
      options.ort_library = globals.ort_lib;
      options.register_cuda_ep = !*no_register;
      const DoctorReport report = run_doctor(options);
      if (globals.json) std::cout << report.to_json() << std::endl;
      else print_human(report);
      return report.has_failures() ? 1 : 0;
    };
  });
}

}  // namespace ortfleet::cli
