#pragma once
// The help texts, made from the command line's own option lists so that they never go stale: every
// option's default shown, the global flags in every subcommand's help, and the shell completion
// (`ortfleet completion bash`) drawn from the same lists.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace ortfleet::cli {

/// The formatter of every help text: an option's default ("(default: 5)") after its description
/// unless the description says it, and after a subcommand's options the global flags it also takes.
std::shared_ptr<CLI::Formatter> help_formatter();

/// Every option of `app` and of its subcommands captures its default for the help: call before any
/// option is added (subcommands copy it when they are made).
void show_defaults(CLI::App& app);

/// A bash completion script for `root`, the commands, flags and choices of every subcommand.
std::string bash_completion(const CLI::App& root);

}  // namespace ortfleet::cli
