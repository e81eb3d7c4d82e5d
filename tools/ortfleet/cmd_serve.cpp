// ortfleet serve: a node-local daemon holding a warm worker pool across jobs; ortfleet pool: ask it
// what it holds, or have it let go (see ortfleet/fleet/pool_server.hpp).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "command.hpp"
#include "run_config_flags.hpp"
#include "flag_checks.hpp"
#include "output.hpp"
#include "ortfleet/base/terminal_text.hpp"
#include "systemd_unit.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/fleet/pool_server.hpp"

namespace ortfleet::cli {

namespace {

struct ServeFlags {
  std::string devices = "all";
  std::string socket;
  size_t max_resident = 0;
  bool no_narrow = false;
  bool no_prime = false;
  bool no_isolation = false;
  bool detach = false;
  bool print_unit = false;
  double idle_exit_s = 0;
  double park_after_s = WarmPoolOptions::kDefaultParkAfterS;
  std::vector<std::string> preload;
  bool preload_cached = false;
  double preload_budget_gb = -1;  // not given: a quarter of the machine's memory
  bool no_remember = false;
  double unload_above_gb = 2;
  RunConfigFlags config;
};

int run_serve(const ServeFlags& f, const Globals& g) {
  if (f.print_unit) {  // the unit for this binary, wherever it was copied, moved or installed
    std::cout << systemd_unit(std::filesystem::canonical("/proc/self/exe").string());
    return 0;
  }
  ServeOptions options;
  TargetFlags target;
  target.devices = f.devices;
  options.pool.devices = target.device_list();
  options.pool.ort_library = g.ort_lib;
  options.pool.config = f.config.resolve();
  options.pool.max_resident_sessions = f.max_resident;
  options.pool.narrow_workers = !f.no_narrow;
  options.pool.prime_libraries = !f.no_prime;
  options.pool.isolate_new_models = !f.no_isolation;
  options.socket_path = f.socket.empty() ? std::string() : pool_socket_named(f.socket);
  options.idle_exit_s = f.idle_exit_s;
  options.park_after_s = f.park_after_s;
  options.pool.unload_above_bytes = static_cast<uint64_t>(f.unload_above_gb * 1e9);
  // The models named here and in the config's warm_pool.preload, each from this folder (the daemon works in /).
  for (const auto* list : std::initializer_list<const std::vector<std::string>*>{&f.preload, &options.pool.config.warm_pool.preload}) {
    for (const auto& model : *list) options.preload.models.push_back(std::filesystem::absolute(model).lexically_normal().string());
  }
  options.pool.config.warm_pool.preload.clear();
  options.preload.cached = f.preload_cached;
  options.preload.remember = !f.no_remember;
  if (f.preload_budget_gb >= 0) options.preload.budget_bytes = static_cast<uint64_t>(f.preload_budget_gb * 1e9);
  if (!f.detach) return serve_pool(options, g.quiet);
  const DetachedPool pool = serve_pool_detached(options);
  if (!g.quiet) {
    if (!pool.replaced.empty()) std::cout << "took over " << pool.replaced << "\n";
    std::cout << fmt::format("a warm pool serves on {} as a daemon of its own (its log {}){}; `ortfleet pool stop` stops it\n", pool.socket_path,
                             pool.log_path,
                             pool.parking.state == ParkingStatus::State::on    ? fmt::format(": its workers park after {:g} s unused", pool.park_after_s)
                             : pool.parking.state == ParkingStatus::State::off ? std::string()
                                                                               : ": its workers do not park (" + pool.parking.why + ")");
  }
  return 0;
}

std::string socket_or_default(const std::string& socket) { return socket.empty() ? default_pool_socket() : pool_socket_named(socket); }

/// Each model path by the fewest trailing parts that tell it from the others (its file name, unless two
/// models share one): a table row of a session stays within a terminal's width, and the name stays whole.
std::map<std::string, std::string> short_model_names(const std::set<std::string>& paths) {
  std::map<std::string, std::string> names;
  for (size_t parts = 1; names.size() < paths.size(); ++parts) {
    std::map<std::string, std::vector<std::string>> by_name;
    for (const auto& path : paths) {
      if (names.count(path) != 0) continue;
      std::vector<std::filesystem::path> tail;
      for (auto p = std::filesystem::path(path); !p.filename().empty() && tail.size() < parts; p = p.parent_path()) tail.push_back(p.filename());
      std::filesystem::path name;
      for (auto it = tail.rbegin(); it != tail.rend(); ++it) name /= *it;
      // Every part used (a short path) or unique: its name. Else more parts next round.
      by_name[tail.size() < parts ? path : name.string()].push_back(path);
    }
    for (const auto& [name, owners] : by_name) {
      if (owners.size() == 1) names.emplace(owners.front(), name);
    }
  }
  return names;
}

/// A session's own memory as the pool tells it ("own_memory": GPU memory and host PSS its worker holds
/// beyond what it held blank, given while the session is the worker's only one): "GPU 410 MB, host 35.1 MB",
/// "35.1 MB" on a CPU worker; "-" where it cannot be known.
std::string own_memory_text(const nlohmann::json& session, bool gpu) {
  const auto own = session.find("own_memory");
  if (own == session.end() || !own->is_object()) return "-";
  std::string text;
  if (gpu && own->contains("gpu_bytes")) text = "GPU " + bytes_text(own->value("gpu_bytes", uint64_t{0}));
  if (own->contains("host_pss_bytes")) {
    text += (text.empty() ? (gpu ? "host " : "") : ", host ") + bytes_text(own->value("host_pss_bytes", uint64_t{0}));
  }
  return text.empty() ? "-" : text;
}

/// What tells a session from the others of its model ("differs_by": each setting its plan differs in, with
/// its value): "shapes.batches=[1,2]; warmup_runs=3"; "" when it is the only session of its model.
std::string differs_text(const nlohmann::json& session) {
  const auto differs = session.find("differs_by");
  if (differs == session.end() || !differs->is_object()) return "";
  std::string text;
  for (const auto& [setting, value] : differs->items()) {
    std::string name = setting.rfind("config.", 0) == 0 ? setting.substr(7) : setting;  // the plan's config: as the config file names it
    text += (text.empty() ? "" : "; ") + name + "=" + (value.is_string() ? value.get<std::string>() : value.is_null() ? "(none)" : value.dump());
  }
  return text;
}

void print_pool_status(const nlohmann::json& j) {
  std::cout << "pool server pid " << j.value("pid", 0) << " on " << j.value("socket", "") << ", "
            << count_text(j.value("clients", 0), "client") << " connected";
  if (const double idle_exit = j.value("idle_exit_s", 0.0); idle_exit > 0) {
    std::cout << fmt::format("; exits after {:g} s idle (idle for {:.0f} s)", idle_exit, j.value("idle_s", 0.0));
  }
  if (const std::string job = j.value("slurm_job", ""); !job.empty()) std::cout << "; ends with Slurm job " << job;
  std::cout << "\n";
  const auto parking = j.value("parking", nlohmann::json::object());
  if (const std::string state = parking.value("state", ""); state == "on") {
    std::cout << fmt::format("idle workers park after {:g} s: the driver holds their GPU state in host memory until the next job\n",
                             j.value("park_after_s", 0.0));
  } else if (!state.empty()) {
    std::cout << "workers do not park: " << (state == "off" ? "off (" + parking.value("why", "") + ")" : parking.value("why", "")) << "\n";
  }
  if (const auto preload = j.value("preload", nlohmann::json::object()); preload.value("chosen", 0) > 0 || !preload.value("left_out", nlohmann::json::array()).empty()) {
    // What the daemon made resident as it started, before any job asked.
    std::cout << fmt::format("made resident at start: {} of {}{}", preload.value("made", 0), count_text(preload.value("chosen", 0), "session"),
                             preload.value("state", "") == "making" ? " (still making them)" : "");
    if (const size_t left = preload.value("left_out", nlohmann::json::array()).size(); left > 0) std::cout << fmt::format("; {} left out", left);
    if (const size_t failed = preload.value("failed", nlohmann::json::array()).size(); failed > 0) std::cout << fmt::format("; {} failed", failed);
    std::cout << "\n";
    for (const auto& line : preload.value("left_out", nlohmann::json::array())) std::cout << "  left out: " << terminal_text(line.get<std::string>()) << "\n";
    for (const auto& line : preload.value("failed", nlohmann::json::array())) std::cout << "  failed: " << terminal_text(line.get<std::string>()) << "\n";
  }
  for (const auto& model : j.value("cache_fills", nlohmann::json::array())) {
    std::cout << "making the model cache entry of " << terminal_text(model.get<std::string>()) << " in the background\n";
  }
  std::cout << "\n";
  // Memory is each worker's own: its GPU memory (NVML) and its share of host memory (PSS, which counts
  // the libraries every worker maps once in all); a parked worker's GPU state is in its host memory.
  Table workers({"device", "role", "state", "pid", "sessions", "GPU memory", "host memory", "note"},
                {false, false, false, true, true, true, true, false});
  // A session's own memory only where it can be known (the pool says it, own_memory: what its worker holds
  // beyond its blank self while that session is its only one), else "-"; what tells sessions of one model
  // apart (differs_by: the settings their plans differ in) last, as free text. docs/serving.md explains each column.
  Table sessions({"device", "model", "holders", "idle", "own memory", "differs by", "preloaded"}, {false, false, true, true, true, false, false});
  sessions.name_rows_by(2);  // a device holds sessions of several models
  bool unknown_memory = false;
  std::set<std::string> models;
  for (const auto& d : j.at("devices")) {
    for (const auto& s : d.value("sessions", nlohmann::json::array())) models.insert(s.value("model", ""));
  }
  const auto model_names = short_model_names(models);
  for (const auto& d : j.at("devices")) {
    const bool parked = d.value("parked", false);
    const std::string state = parked ? fmt::format("parked {:.0f} s", d.value("parked_s", 0.0)) : d.value("state", "");
    const auto gpu = d.find("gpu_memory_bytes");
    const std::string gpu_text = d.value("device", "").rfind("cuda", 0) != 0 ? std::string("-")
                                 : gpu != d.end() && gpu->is_number_unsigned() ? bytes_text(gpu->get<uint64_t>())
                                                                                : std::string("?");
    std::string note = d.value("error", "");
    if (note.empty()) note = d.value("note", "");
    // Sessions dropped before it parked (large weights): made again from their cache entry when a job comes.
    if (const size_t unloaded = d.value("unloaded", nlohmann::json::array()).size(); note.empty() && unloaded > 0) {
      note = fmt::format("{} unloaded (made again when a job comes)", count_text(unloaded, "model"));
    }
    workers.add({d.value("device", ""), d.value("role", "shared"), state, std::to_string(d.value("pid", 0)),
                 std::to_string(d.value("sessions", nlohmann::json::array()).size()), gpu_text, bytes_text(d.value("host_pss_bytes", uint64_t{0})),
                 note});
    for (const auto& s : d.value("sessions", nlohmann::json::array())) {
      const std::string own = own_memory_text(s, d.value("device", "").rfind("cuda", 0) == 0);
      unknown_memory = unknown_memory || own == "-";
      sessions.add({d.value("device", ""), model_names.at(s.value("model", "")), std::to_string(s.value("holders", 0)),
                    duration_text(s.value("idle_s", 0.0) * 1000), own, differs_text(s), s.value("preloaded", false) ? "yes" : ""});
    }
  }
  workers.print(std::cout, "no workers");
  if (const auto total = j.find("total"); total != j.end() && total->is_object()) {
    std::cout << fmt::format("\nin all: {}, GPU memory {}, host memory {} (PSS)\n", count_text(total->value("workers", 0), "worker"),
                             bytes_text(total->value("gpu_memory_bytes", uint64_t{0})), bytes_text(total->value("host_pss_bytes", uint64_t{0})));
  }
  if (sessions.empty()) std::cout << "\nno resident sessions\n";
  else {
    std::cout << "\nresident sessions:\n";
    sessions.print(std::cout);
    if (unknown_memory) {
      std::cout << "\nown memory \"-\": the session shares its worker with others; their memory together is the worker's\n";
    }
    bool shortened = false;
    for (const auto& [path, name] : model_names) shortened = shortened || name != path;
    if (shortened) {
      std::cout << "\nmodels:\n";
      for (const auto& [path, name] : model_names) std::cout << "  " << terminal_text(name) << ": " << terminal_text(path) << "\n";
    }
  }
}

}  // namespace

std::string pool_socket_named(const std::string& given) { return given == "default" ? default_pool_socket() : given; }

void register_serve(CLI::App& app, Globals& globals, Action& action) {
  auto* cmd = app.add_subcommand("serve", "Keep a warm worker pool for every job on this node (a daemon on a Unix socket)");
  auto f = std::make_shared<ServeFlags>();
  add_devices_option(cmd, f->devices, /*one_device=*/false, "Devices: all, 0,1, cuda:0-3, cpu, cpu*2 (default all)");
  cmd->add_option("--socket", f->socket, std::string("The Unix socket to listen on ('default' or left out: ") + kDefaultSocketDoc + ")");
  add_setting_option(cmd, Setting::max_resident, f->max_resident);  // name, help and check: the settings table's
  cmd->add_flag("--no-narrow-workers", f->no_narrow, "Let every worker see every GPU (CUDA_VISIBLE_DEVICES as given)");
  cmd->add_flag("--no-prime", f->no_prime, "Do not load cuDNN and cuBLAS with throwaway sessions while the workers start");
  cmd->add_flag("--detach", f->detach,
                "Run as a daemon of its own and return once it listens (its log beside the socket): what a systemd unit, a Slurm job "
                "script or a shell starts and forgets");
  cmd->add_flag("--print-unit", f->print_unit,
                "Print the systemd user unit that runs this ortfleet binary as the node daemon, and exit (a copied or moved build, a "
                "pip install: `ortfleet serve --print-unit > ~/.config/systemd/user/ortfleet.service`)");
  cmd->add_flag("--no-isolation", f->no_isolation,
                "Start models new to the pool in the shared worker too (saves a spare worker per device; a crash inside ONNX Runtime "
                "then ends the sessions every job holds on that device)");
  add_setting_option(cmd, Setting::idle_exit, f->idle_exit_s);
  add_setting_option(cmd, Setting::park_after, f->park_after_s);
  // A node's models, resident and parked before any job asks (docs/serving.md, "The node daemon").
  add_setting_option(cmd, Setting::preload, f->preload)->check(CLI::ExistingFile);
  add_setting_flag(cmd, Setting::preload_cached, f->preload_cached);
  add_setting_option(cmd, Setting::preload_budget, f->preload_budget_gb);
  add_setting_flag(cmd, Setting::remember_served, f->no_remember);
  add_setting_option(cmd, Setting::unload_above, f->unload_above_gb);
  f->config.add_to(cmd);  // its warm pool's idle time is --idle-exit: no --warm-pool-idle here
  cmd->callback([cmd, &globals, &action, f] {
    const FlagChecks flags(*cmd);
    for (const auto& other : {"--devices", "--socket", "--max-resident", "--no-narrow-workers", "--no-prime", "--detach", "--no-isolation",
                              "--idle-exit", "--park-after"}) {
      flags.excludes("--print-unit", other, "the unit runs `serve --devices all --idle-exit 0`; edit its ExecStart= line for more");
    }
    f->config.check(flags);
    action = [&globals, f] { return run_serve(*f, globals); };
  });

  auto* pool = app.add_subcommand("pool", "Ask the pool server (ortfleet serve) what it holds, or have it let go");
  pool->require_subcommand(1);
  auto socket = std::make_shared<std::string>();
  pool->add_option("--socket", *socket, std::string("The pool server's socket ('default' or left out: ") + kDefaultSocketDoc + ")");
  auto* status = pool->add_subcommand("status", "Devices, workers, resident sessions and memory");
  auto* evict = pool->add_subcommand("evict", "Drop every resident session that no job holds");
  auto* stop = pool->add_subcommand("stop", "Stop the pool server and its workers (it waits until the socket is gone)");
  // No pool server on the socket is an answer, not a failure: status and evict say so and exit 4
  // (documented with every exit code in docs/cli.md); stop has nothing to do and exits 0.
  const auto no_pool = [&globals](const std::string& path, const Error& e, bool an_answer) {
    if (e.what_failed().rfind("no warm pool runs on", 0) != 0) return false;  // pool_client.cpp's words for no server
    if (globals.quiet && !an_answer) return true;
    std::cerr << "ortfleet: no pool server on " << path << ": nothing of ortfleet's runs there (a start with --strategy auto leaves "
              << "one, `ortfleet serve` starts one)" << std::endl;
    return true;
  };
  stop->callback([&globals, &action, socket, no_pool] {
    action = [&globals, socket, no_pool] {
      const std::string path = socket_or_default(*socket);
      try {
        pool_stop(path);
      } catch (const Error& e) {
        if (!no_pool(path, e, /*an_answer=*/false)) throw;
        if (globals.json) print_json({{"stopped", nullptr}, {"socket", path}});
        return 0;
      }
      if (globals.json) print_json({{"stopped", path}});
      else if (!globals.quiet) std::cout << "stopped the pool server on " << path << "\n";
      return 0;
    };
  });
  status->callback([&globals, &action, socket, no_pool] {
    action = [&globals, socket, no_pool] {
      const std::string path = socket_or_default(*socket);
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(pool_status(path));
      } catch (const Error& e) {
        if (!no_pool(path, e, /*an_answer=*/true)) throw;
        if (globals.json) print_json({{"socket", path}, {"running", false}});
        return kExitNoPool;
      }
      if (globals.json) print_json(j);
      else print_pool_status(j);
      return 0;
    };
  });
  evict->callback([&globals, &action, socket, no_pool] {
    action = [&globals, socket, no_pool] {
      const std::string path = socket_or_default(*socket);
      size_t dropped = 0;
      try {
        dropped = pool_evict(path);
      } catch (const Error& e) {
        if (!no_pool(path, e, /*an_answer=*/true)) throw;
        return kExitNoPool;
      }
      if (globals.json) print_json({{"evicted", dropped}});
      else if (!globals.quiet) std::cout << "evicted " << dropped << " session" << (dropped == 1 ? "" : "s") << "\n";
      return 0;
    };
  });
}

}  // namespace ortfleet::cli
