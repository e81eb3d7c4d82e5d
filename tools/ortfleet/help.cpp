#include "help.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <regex>
#include <sstream>
#include <vector>

namespace ortfleet::cli {

namespace {

const CLI::App& root_of(const CLI::App& app) {
  const CLI::App* at = &app;
  while (at->get_parent() != nullptr) at = at->get_parent();
  return *at;
}

/// The options a user gives, not the help and version flags every command has.
std::vector<const CLI::Option*> own_options(const CLI::App& app) {
  return app.get_options([&](const CLI::Option* o) {
    return !o->get_positional() && o != app.get_help_ptr() && o != app.get_help_all_ptr() && o->get_name() != "--version" &&
           !o->get_group().empty();
  });
}

bool mentions_default(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("default") != std::string::npos;
}

class HelpFormatter : public CLI::Formatter {
 public:
  // The default goes into the description, not after the type ("INT:from 1 to 1000=5" reads badly).
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string text = CLI::Formatter::make_option_opts(opt);
    if (const std::string value = opt->get_default_str(); !value.empty()) {
      if (const auto at = text.find("=" + value); at != std::string::npos) text.erase(at, value.size() + 1);
    }
    return text;
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string text = opt->get_description();
    const std::string value = opt->get_default_str();
    // Flags, lists and sentinels (-1: the config's) have no default worth saying; a text that says its
    // own default keeps its words.
    if (opt->get_type_size() == 0 || value.empty() || value == "-1" || value == "[]" || mentions_default(text)) return text;
    return text + " (default: " + value + ")";
  }

  std::string make_footer(const CLI::App* app) const override {
    std::string footer = CLI::Formatter::make_footer(app);
    if (app->get_parent() == nullptr) return footer;
    return make_group("Global options (before or after the subcommand)", false, own_options(root_of(*app))) + footer;
  }
};

/// The choices a flag takes, read from its help's type ("TEXT:{sequential,threads}"), or none.
std::vector<std::string> choices_of(const CLI::Option* opt) {
  std::vector<std::string> out;
  static const std::regex braces(R"(\{([^}]*)\})");
  std::smatch m;
  const std::string type = opt->get_type_name();
  if (!std::regex_search(type, m, braces)) return out;
  std::stringstream list(m[1].str());
  for (std::string item; std::getline(list, item, ',');) out.push_back(item);
  return out;
}

/// Every subcommand below `app`, with its path of names ("cache export"), depth first.
void each_command(const CLI::App& app, const std::string& path, const std::function<void(const CLI::App&, const std::string&)>& visit) {
  visit(app, path);
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_group().empty()) continue;  // hidden
    each_command(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), visit);
  }
}

std::string names_of(const std::vector<const CLI::Option*>& options, const std::function<bool(const CLI::Option*)>& pick) {
  std::string out;
  for (const CLI::Option* o : options) {
    if (!pick(o)) continue;
    for (const auto& s : o->get_snames()) out += " -" + s;
    for (const auto& l : o->get_lnames()) out += " --" + l;
  }
  return out.empty() ? out : out.substr(1);
}

}  // namespace

std::shared_ptr<CLI::Formatter> help_formatter() { return std::make_shared<HelpFormatter>(); }

void show_defaults(CLI::App& app) { app.option_defaults()->always_capture_default(); }

std::string bash_completion(const CLI::App& root) {
  const std::string global = names_of(own_options(root), [](const CLI::Option*) { return true; });
  std::string paths;     // case patterns of the words that name a command
  std::string commands;  // per command path: its flags and subcommands
  std::string values;    // flags that take a value: their choices, else files
  std::vector<std::string> seen_values;
  each_command(root, "", [&](const CLI::App& app, const std::string& path) {
    const auto options = own_options(app);
    std::string subs;
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (!sub->get_group().empty()) subs += (subs.empty() ? "" : " ") + sub->get_name();
    }
    if (!path.empty()) paths += fmt::format("      \"{}\") path=\"{}\" ;;\n", path, path);
    const std::string flags = names_of(options, [](const CLI::Option*) { return true; });
    commands += fmt::format("    \"{}\") flags=\"{}{}\"; subs=\"{}\" ;;\n", path, flags, path.empty() ? "" : " " + global, subs);
    for (const CLI::Option* o : options) {
      if (o->get_type_size() == 0) continue;
      const std::string names = names_of({o}, [](const CLI::Option*) { return true; });
      const auto choices = choices_of(o);
      const std::string key = names + "=" + fmt::format("{}", fmt::join(choices, " "));
      if (std::find(seen_values.begin(), seen_values.end(), key) != seen_values.end()) continue;
      seen_values.push_back(key);
      std::string pattern = names;
      std::replace(pattern.begin(), pattern.end(), ' ', '|');
      // --devices takes device words, not files: all, cpu, and this machine's GPUs by ordinal (/dev/nvidiaN).
      values += o->check_name("--devices") ? fmt::format("      {}) COMPREPLY=($(compgen -W \"$(_ortfleet_devices)\" -- \"$cur\")); return ;;\n", pattern)
                : choices.empty()            ? fmt::format("      {}) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", pattern)
                                             : fmt::format("      {}) COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); return ;;\n", pattern, fmt::join(choices, " "));
    }
  });
  // Later patterns of the same flag (another command's choices) never match: a flag's first wins, and
  // flags of the same name take the same values across commands.
  return fmt::format(R"(# bash completion for ortfleet, generated by `ortfleet completion bash` from its own option lists.
# Use: source <(ortfleet completion bash), or save it as /etc/bash_completion.d/ortfleet.
_ortfleet_devices() {{
  local n words="all cpu cpu*2"
  for n in /dev/nvidia[0-9]*; do [ -e "$n" ] && words+=" ${{n#/dev/nvidia}} cuda:${{n#/dev/nvidia}}"; done
  echo "$words"
}}
_ortfleet() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" path="" word i flags subs
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${{COMP_WORDS[i]}}"
    case "${{path:+$path }}$word" in
{}    esac
  done
  if [[ "$prev" == -* ]]; then
    case "$prev" in
{}    esac
  fi
  case "$path" in
{}  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  elif [ -n "$subs" ]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
complete -o filenames -F _ortfleet ortfleet
)",
                     paths, values, commands);
}

}  // namespace ortfleet::cli
