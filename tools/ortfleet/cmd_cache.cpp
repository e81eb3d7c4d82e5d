// ortfleet cache: the pre-optimised models the model cache holds (see ortfleet/engine/cache.hpp).
#include <algorithm>
#include <iostream>
#include <memory>

#include "cli.hpp"
#include "ortfleet/engine/cache.hpp"

namespace ortfleet::cli {

void register_cache(CLI::App& app, Globals& globals, Action& action) {
  auto* cmd = app.add_subcommand("cache", "List or clear the cache of pre-optimised models");
  cmd->require_subcommand(1);
  auto* list = cmd->add_subcommand("list", "List the cached pre-optimised models");
  auto* clear = cmd->add_subcommand("clear", "Delete every cached model");
  list->callback([&globals, &action] {
    action = [&globals] {
      const ModelCache cache;
      const auto entries = cache.entries();
      if (globals.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& e : entries) {
          j.push_back({{"path", e.path}, {"bytes", e.bytes}, {"model", e.model}, {"load", e.load_note}, {"used", e.used}});
        }
        print_json({{"dir", cache.dir()}, {"entries", j}});
        return 0;
      }
      std::cout << cache.dir() << ": " << entries.size() << " cached model(s)\n";
      for (const auto& e : entries) {
        std::cout << "  " << e.path << "  " << format_bytes(e.bytes);
        if (!e.model.empty()) std::cout << "  from " << e.model;
        std::cout << "\n    " << (e.load_note.empty() ? "not priced yet: used" : e.load_note + (e.used ? ": used" : ": not used, the model loads as fast"))
                  << "\n";
      }
      return 0;
    };
  });
  clear->callback([&globals, &action] {
    action = [&globals] {
      const ModelCache cache;
      const size_t n = cache.entries().size();
      const size_t in_use = cache.clear();
      if (!globals.quiet) {
        const size_t left = cache.entries().size();
        std::cout << "removed " << n - std::min(n, left) << " cached model(s) from " << cache.dir();
        if (in_use > 0) std::cout << " (" << in_use << " in use by a running start, kept)";
        std::cout << "\n";
      }
      return 0;
    };
  });
}

}  // namespace ortfleet::cli
