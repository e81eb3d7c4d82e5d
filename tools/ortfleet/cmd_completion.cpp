// ortfleet completion: a shell completion script drawn from the command line's own option lists, so
// that it never goes stale (help.cpp).
#include <iostream>
#include <memory>

#include "command.hpp"
#include "help.hpp"

namespace ortfleet::cli {

void register_completion(CLI::App& app, Globals& /*globals*/, Action& action) {
  auto* cmd = app.add_subcommand("completion", "Print a shell completion script: source <(ortfleet completion bash)");
  auto shell = std::make_shared<std::string>();
  cmd->add_option("shell", *shell, "The shell: bash")->required()->check(CLI::IsMember({"bash"}));
  cmd->callback([&app, &action, shell] {  // `shell` held here: the option writes into it when parsed
    action = [&app] {
      std::cout << bash_completion(app);
      return kExitOk;
    };
  });
}

}  // namespace ortfleet::cli
