// ortfleet: start ONNX Runtime sessions fast on every GPU of a node, and explain where start-up time goes.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <optional>

#include "command.hpp"
#include "flag_checks.hpp"
#include "help.hpp"
#include "output.hpp"
#include "setting_words.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/base/terminal_text.hpp"
#include "ortfleet/engine/ort_log.hpp"
#include "ortfleet/engine/runtime.hpp"

int main(int argc, char** argv) {
  using namespace ortfleet::cli;
  say_settings_as_flags();  // the library names settings; the command line says its flags
  CLI::App app{"ortfleet: fast ONNX Runtime start-up on every GPU of a node, and why start-up is slow"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ortfleet ") + ORTFLEET_VERSION);
  Globals globals;
  globals.command_line = shell_line(argc, argv);
  app.formatter(help_formatter());  // every subcommand copies both when it is made
  show_defaults(app);
  app.fallthrough();  // global flags work after the subcommand too: `ortfleet doctor --json`
  add_setting_option(&app, ortfleet::Setting::ort_library, globals.ort_lib);
  app.add_flag("--json", globals.json, "Print machine-readable JSON on stdout");
  app.add_flag("-v,--verbose", globals.verbose,
               "More on stderr: -v ortfleet's own details (the runtime loaded, the model, devices and settings, each step's debug lines); "
               "-vv also ONNX Runtime's info messages");
  app.add_flag("-q,--quiet", globals.quiet, "No progress, notices or info lines (what a command leaves running, a warm pool, is still said)");

  Action action;
  register_doctor(app, globals, action);
  register_synth(app, globals, action);
  register_start(app, globals, action);
  register_bench(app, globals, action);
  register_profile(app, globals, action);
  register_tune(app, globals, action);
  register_cache(app, globals, action);
  register_serve(app, globals, action);
  register_report(app, globals, action);
  register_completion(app, globals, action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help and --version
    std::cerr << ortfleet::terminal_text(usage_error_line(app, e)) << std::endl;  // a usage error: one line (a value's newline escaped), exit 2
    return kExitUsage;
  }
  auto logger = logger_in_flags("ortfleet");
  logger->set_pattern("%^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(globals.verbose > 0 ? spdlog::level::debug : globals.quiet ? spdlog::level::warn : spdlog::level::info);
  try {
    // Every ORTFLEET_* variable checked before any work, as the flags were: a bad one refused in one line
    // naming it (exit 2, like a flag's), or warned about; an unknown name warned about.
    ortfleet::check_environment();
  } catch (const ortfleet::Error& e) {
    std::cerr << "ortfleet: error: " << e.what() << std::endl;
    return kExitUsage;
  }
  if (globals.verbose > 1) ::setenv("ORTFLEET_ORT_LOG_LEVEL", "info", 0);
  // ONNX Runtime repeats some warnings once per session and worker: a command says each once, with
  // its count, at its end (serve, which has no end, the first of each as it comes).
  const bool daemon = app.got_subcommand("serve");
  if (!daemon) ortfleet::hold_ort_warnings();
  end_process(guarded([&] {
    struct SayWarnings {
      bool enabled;
      ~SayWarnings() {
        try {
          if (enabled) ortfleet::print_ort_warnings();  // before a failed command's error line
        } catch (...) {  // a destructor's exception would abort the command at its end
        }
      }
    } say_warnings{!daemon};
    // A runtime the user named must load, whatever the command: fail here, in one line, not later
    // once per device.
    if (!globals.ort_lib.empty()) ortfleet::load_runtime(globals.ort_lib);
    return action();
  }));
}
