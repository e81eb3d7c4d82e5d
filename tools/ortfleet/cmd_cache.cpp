// ortfleet cache: the pre-optimised models the model cache holds (see ortfleet/engine/cache.hpp): list
// and clear them, and carry them to other machines of the same kind in a bundle (export, import).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "command.hpp"
#include "run_config_flags.hpp"
#include "output.hpp"
#include "ortfleet/base/terminal_text.hpp"
#include "ortfleet/engine/cache.hpp"

namespace ortfleet::cli {

namespace {

struct ExportFlags {
  std::vector<std::string> models;
  std::string out;
  std::string devices = "all";
  RunConfigFlags config;
};

struct ImportFlags {
  std::string bundle;
  std::string shared;
};

nlohmann::json bundle_json(const CacheBundle& b, const std::string& dir) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& e : b.entries) {
    entries.push_back({{"model", e.model}, {"device_class", e.device_class}, {"entry", e.name}, {"bytes", e.bytes}, {"outcome", e.outcome},
                       {"load", e.load_note}});
  }
  return {{"bundle", b.path},        {"bundle_bytes", b.bytes},  {"dir", dir}, {"ortfleet_version", b.ortfleet_version},
          {"onnxruntime_version", b.onnxruntime_version}, {"device_classes", b.device_classes}, {"entries", entries}};
}

/// One row per entry, named by the entry (its model's stem and key), or by its model's file where there
/// is none (the outcome says why): a model's name once, so that the row keeps one line.
void print_entries(const CacheBundle& b) {
  Table table({"entry", "made for", "size", "outcome", "at start"}, {false, false, true, false, false});
  for (const auto& e : b.entries) {
    table.add({e.name.empty() ? std::filesystem::path(e.model).filename().string() : e.name, e.device_class,
               e.bytes > 0 ? bytes_text(e.bytes) : "-", e.outcome, e.load_note});
  }
  table.print(std::cout, "no entries");
}

size_t count_of(const CacheBundle& b, std::initializer_list<const char*> outcomes) {
  return static_cast<size_t>(std::count_if(b.entries.begin(), b.entries.end(), [&](const BundleEntry& e) {
    return std::any_of(outcomes.begin(), outcomes.end(), [&](const char* o) { return e.outcome == o; });
  }));
}

int run_export(const ExportFlags& f, const Globals& g) {
  TargetFlags target;
  target.devices = f.devices;
  const ModelCache cache;
  const CacheBundle b = cache.export_bundle(f.models, target.device_list(), f.config.resolve(), f.out);
  if (g.json) {
    print_json(bundle_json(b, cache.dir()));
    return 0;
  }
  // Each entry in the bundle counted once: one asked for twice is "in the bundle once, as ...".
  const size_t exported = count_of(b, {"exported"});
  const size_t twice = static_cast<size_t>(std::count_if(b.entries.begin(), b.entries.end(), [](const BundleEntry& e) {
    return e.outcome.rfind("in the bundle once", 0) == 0;
  }));
  std::cout << "exported " << exported << " entr" << (exported == 1 ? "y" : "ies") << " to " << b.path << " (" << bytes_text(b.bytes)
            << "; ortfleet " << b.ortfleet_version << ", ONNX Runtime " << b.onnxruntime_version << ")";
  if (const size_t left_out = b.entries.size() - exported - twice; left_out > 0) std::cout << "; " << left_out << " not exported (see below)";
  if (twice > 0) std::cout << "; " << twice << " asked for again";
  std::cout << "\n\n";
  print_entries(b);
  return 0;
}

int run_import(const ImportFlags& f, const Globals& g) {
  const ModelCache cache(f.shared.empty() ? std::string() : (std::filesystem::path(f.shared) / "models").string());
  const CacheBundle b = cache.import_bundle(f.bundle, /*shared_layer=*/!f.shared.empty());
  if (g.json) {
    print_json(bundle_json(b, cache.dir()));
    return 0;
  }
  const size_t added = count_of(b, {"added", "replaced"});
  std::cout << "imported " << added << " of " << b.entries.size() << " entr" << (b.entries.size() == 1 ? "y" : "ies") << " from " << b.path
            << " (ortfleet " << b.ortfleet_version << ", ONNX Runtime " << b.onnxruntime_version << ") into " << cache.dir()
            << (f.shared.empty() ? "" : ", a shared layer: starts use it with ORTFLEET_CACHE_SHARED=" + f.shared) << "\n\n";
  print_entries(b);
  return 0;
}

/// What a start does with the entry, in words.
std::string entry_use(const CacheEntry& e) {
  if (!e.skipped.empty()) return e.skipped + " (not used)";
  if (e.load_note.empty()) return "not priced yet: used";
  return e.load_note + (e.used ? ": used" : ": not used, the model loads as fast");
}

void print_cache_entries(const std::vector<CacheEntry>& entries) {
  for (const auto& e : entries) {
    std::cout << "  " << terminal_text(e.path) << "  " << bytes_text(e.bytes);
    if (!e.model.empty()) std::cout << "  from " << terminal_text(e.model);
    std::cout << "\n    " << terminal_text(entry_use(e)) << "\n";
  }
}

}  // namespace

void register_cache(CLI::App& app, Globals& globals, Action& action) {
  auto* cmd = app.add_subcommand("cache", "List, clear, export or import the cache of pre-optimised models");
  cmd->require_subcommand(1);
  auto* list = cmd->add_subcommand("list", "List the cached pre-optimised models (and the shared layer's, ORTFLEET_CACHE_SHARED)");
  auto* clear = cmd->add_subcommand("clear", "Delete every cached model");
  list->callback([&globals, &action] {
    action = [&globals] {
      const ModelCache cache;
      const auto entries = cache.entries();
      const auto shared = ModelCache::shared_root();
      std::vector<CacheEntry> shared_entries;
      if (shared) shared_entries = ModelCache((std::filesystem::path(*shared) / "models").string()).entries(/*private_folder=*/false);
      if (globals.json) {
        const auto to_json = [](const std::vector<CacheEntry>& found) {
          nlohmann::json j = nlohmann::json::array();
          for (const auto& e : found) {
            j.push_back({{"path", e.path}, {"bytes", e.bytes}, {"model", e.model}, {"load", e.load_note}, {"used", e.used}, {"skipped", e.skipped}});
          }
          return j;
        };
        nlohmann::json j = {{"dir", cache.dir()}, {"entries", to_json(entries)}};
        if (shared) j["shared"] = {{"dir", *shared}, {"entries", to_json(shared_entries)}};
        print_json(j);
        return 0;
      }
      std::cout << cache.dir() << ": " << count_text(entries.size(), "cached model") << "\n";
      print_cache_entries(entries);
      if (shared) {
        std::cout << "shared layer " << *shared << " (read-only, looked in first): " << count_text(shared_entries.size(), "cached model") << "\n";
        print_cache_entries(shared_entries);
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
        std::cout << "removed " << count_text(n - std::min(n, left), "cached model") << " from " << cache.dir();
        if (in_use > 0) std::cout << " (" << in_use << " in use by a running start, kept)";
        std::cout << "\n";
      }
      return 0;
    };
  });

  auto* exp = cmd->add_subcommand("export",
                                  "Write the verified cache entries of models into one bundle file, for machines of the same kind "
                                  "(same GPU architecture or CPU, same ONNX Runtime and ortfleet)");
  auto ef = std::make_shared<ExportFlags>();
  exp->add_option("models", ef->models, "The models whose entries to export (each started once here before)")->required();
  add_output_option(exp, "-o,--out", ef->out, "The bundle file to write (a tar: `tar tvf` lists it); an existing file is replaced only when it is a bundle")->required();
  add_devices_option(exp, ef->devices, /*one_device=*/false,
                  "The devices whose entries to export, by their kind (GPU architecture, or the CPU): all (default), 0, cpu, ...");
  ef->config.add_to(exp);
  // Of the session flags, only those that choose an entry (what its key holds: how the graph was optimised
  // and stored); a session's threads, shapes, warm-up and the rest make no other entry, so `--help` lists none of them.
  std::vector<CLI::Option*> no_entry_of_their_own;
  for (CLI::Option* o : exp->get_options()) {
    const bool kept = o->get_positional() || o->check_name("--help") || o->check_name("--out") || o->check_name("--devices") ||
                      o->check_name("--config") || o->check_name("--graph-opt") || o->check_name("--model-cache-format") ||
                      o->check_name("--session-config");
    if (!kept) no_entry_of_their_own.push_back(o);
  }
  for (CLI::Option* o : no_entry_of_their_own) exp->remove_option(o);
  exp->callback([exp, &globals, &action, ef] {
    ef->config.check(FlagChecks(*exp));
    action = [&globals, ef] { return run_export(*ef, globals); };
  });

  auto* imp = cmd->add_subcommand("import",
                                  "Check a bundle from `cache export` whole, then add its entries to the cache as if made here (refused, "
                                  "leaving the cache as it was, when anything does not fit this machine or build)");
  auto inf = std::make_shared<ImportFlags>();
  imp->add_option("bundle", inf->bundle, "The bundle file")->required();
  imp->add_option("--shared", inf->shared,
                  "Import into this folder as a shared layer other users and nodes read (ORTFLEET_CACHE_SHARED=FOLDER), instead of "
                  "your cache: folders 0755, files 0644, the folder yours and writable by nobody else");
  imp->callback([&globals, &action, inf] { action = [&globals, inf] { return run_import(*inf, globals); }; });
}

}  // namespace ortfleet::cli
