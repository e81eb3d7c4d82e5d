#include "ortfleet/diagnostics/crash_locator.hpp"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "base/private_dir.hpp"
#include "engine/files/npy_file.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/session.hpp"
#include "engine/cache/output_compare.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "process/child_process.hpp"
#include "synth/onnx_graph.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

void run_crash_step(const std::string& model, const Device& device, const RunConfig& config, const std::string& dir) {
  SessionSpec spec;
  spec.model_path = model;
  spec.device = device;
  spec.config = config;
  spec.config.session.optimized_model_cache = false;  // a try runs the graph it was given
  Session session(spec);
  const auto inputs = session.warmup_inputs();
  detail::write_npz((fs::path(dir) / "inputs.npz").string(), inputs);
  std::vector<Tensor> kept;
  for (auto& t : session.run(inputs)) {
    if (element_type_info(t.type) != nullptr && element_type_info(t.type)->numpy_kind != 0) kept.push_back(std::move(t));
  }
  detail::write_npz((fs::path(dir) / "outputs.npz").string(), kept);
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int onnx_type_number(ElementType t) { return static_cast<int>(t); }

/// How a try ended.
struct Try {
  bool crashed = false;
  bool ran = false;
  std::string how;
  std::vector<Tensor> outputs;
  std::vector<Tensor> inputs;
};

/// Marks a folder as --locate-crash's own, so that a later locate may write into it again.
constexpr const char* kOutDirMarker = ".ortfleet-crash-locator";

class Locator {
 public:
  explicit Locator(const CrashLocateOptions& o) : o_(o), start_(std::chrono::steady_clock::now()) {
    ortfleet_ = detail::ortfleet_executable(o.ortfleet_path);
    out_ = o.out_dir.empty() ? fs::absolute(fs::path(o.model).stem().string() + "-crash") : fs::absolute(o.out_dir);
    check_out_dir();  // refused before the first try, made only once the model crashed
    // The first try (the whole model) runs in a temporary folder: a model that does not crash leaves
    // nothing behind.
    first_try_.emplace(detail::PrivateDir::temporary("ortfleet-locate-crash"));
    use_folder(first_try_->path());
  }

  /// The folder the cut models and the tries go in (config.json, prefix.onnx, workaround.json, ...),
  /// once the model crashed: made now; weights in external data files beside the model are linked
  /// there, so that the cut models find them.
  void claim_out_dir() {
    fs::create_directories(out_);
    std::ofstream(out_ / kOutDirMarker) << "made by ortfleet doctor --locate-crash: its files here may be replaced by the next locate\n";
    const fs::path folder = fs::absolute(o_.model).parent_path();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
      const fs::path link = out_ / e.path().filename();
      if (e.path().extension() != ".onnx" && e.is_regular_file(ec) && !fs::exists(link, ec)) fs::create_symlink(e.path(), link, ec);
    }
    use_folder(out_);
  }

  /// The out folder must be new, empty, or an earlier locate's (its marker file says so). A folder
  /// holding anything else is a user's, whose files those names would replace: refused.
  void check_out_dir() const {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(out_, ec)) && !fs::exists(out_ / kOutDirMarker, ec)) {
      if (!fs::is_directory(out_, ec)) throw Error(out_.string() + " is not a folder", "Give --out the path of a new folder");
      if (!fs::is_empty(out_, ec)) {
        throw Error(out_.string() + " holds files ortfleet did not make, and --locate-crash writes config.json, prefix.onnx, "
                                    "workaround.json and more there",
                    "Give --out a new or empty folder");
      }
    }
  }

  /// Tries write into `folder` from now on, with the config (less the model cache) saved there: the
  /// device comes with each try, so the same config serves the CPU EP's.
  void use_folder(const fs::path& folder) {
    folder_ = folder;
    RunConfig config = o_.config;
    config.session.optimized_model_cache = false;
    config_path_ = (folder_ / "config.json").string();
    config.save(config_path_);
  }

  /// Runs `model` (a file under out_) on `device` in a fresh process, with `entries` added to the
  /// config's session config entries.
  Try attempt(const std::string& model, const Device& device, const std::string& label, const std::string& warmup_inputs = {},
              const std::map<std::string, std::string>& entries = {}) {
    const fs::path dir = folder_ / ("try-" + std::to_string(++tries_));
    fs::create_directories(dir);
    std::string config = config_path_;
    if (!warmup_inputs.empty() || !entries.empty()) {
      RunConfig with_inputs = RunConfig::load(config);
      if (!warmup_inputs.empty()) {
        with_inputs.warmup.inputs_file = warmup_inputs;
        with_inputs.shapes.declared.clear();  // the file's shapes are the ones to run
        with_inputs.shapes.batches.clear();
      }
      for (const auto& [k, v] : entries) with_inputs.session.config_entries[k] = v;
      config = (dir / "config.json").string();
      with_inputs.save(config);
    }
    const auto r = detail::run_child({ortfleet_, "-q", "doctor", model, "--crash-step", dir.string(), "--device", device.to_string(),
                                      "--config", config},
                                     {}, "", o_.try_timeout_s);
    Try t;
    t.crashed = r.crashed();
    t.ran = r.exit_code == 0;
    // How it ended, without the crash line the child printed (it names the try's own model).
    t.how = r.timed_out ? fmt::format("did not finish within {:.0f} s", o_.try_timeout_s) : r.describe();
    if (t.crashed) t.how = t.how.substr(0, t.how.find(": ortfleet: "));
    if (fs::exists(dir / "inputs.npz")) t.inputs = detail::read_npz((dir / "inputs.npz").string());
    if (t.ran && fs::exists(dir / "outputs.npz")) t.outputs = detail::read_npz((dir / "outputs.npz").string());
    if (o_.progress) {
      o_.progress(fmt::format("try {} ({:.1f} s): {} -> {}", tries_, seconds_since(start_), label,
                              t.crashed ? "crashed" : t.ran ? "ran" : "failed"));
    }
    return t;
  }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (out_ / name).string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return path;
  }

  CrashLocation run() {
    CrashLocation r;
    r.model = o_.model;
    r.device = o_.device.to_string();
    const Try whole = attempt(fs::absolute(o_.model).string(), o_.device, "the whole model");
    r.crashed = whole.crashed;
    r.how = whole.how;
    if (!whole.crashed) {
      r.notes.push_back("the whole model did not crash here (" + whole.how + "): nothing to locate, and nothing written");
      return finish(r);
    }
    claim_out_dir();
    first_try_.reset();
    const onnx::OnnxGraph graph = onnx::OnnxGraph::load(o_.model);
    const auto& nodes = graph.nodes();
    r.nodes = nodes.size();
    std::string original_inputs;
    if (!whole.inputs.empty()) {
      original_inputs = (out_ / "model_inputs.npz").string();
      detail::write_npz(original_inputs, whole.inputs);
    }
    // The first k nodes crash, the first lo do not: the node at index hi - 1 is the first whose
    // execution crashes (with graph optimisation on, the fused group that ends there).
    size_t lo = 0;
    size_t hi = nodes.size();
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      const std::string path = write("prefix.onnx", graph.prefix_model(mid));
      const Try t = attempt(path, o_.device, fmt::format("the first {} of {} nodes", mid, nodes.size()));
      if (t.crashed) {
        hi = mid;
      } else {
        lo = mid;
        if (!t.ran) r.notes.push_back(fmt::format("the first {} nodes did not crash but failed: {}", mid, t.how));
      }
    }
    const size_t index = hi - 1;
    const onnx::GraphNode& n = nodes[index];
    CrashNode node;
    node.index = index;
    node.name = n.name;
    node.op_type = n.op_type;
    node.domain = n.domain;
    node.opset = graph.opset(n.domain);
    node.attributes = n.attributes;
    r.smallest_model = write("crash_prefix.onnx", graph.prefix_model(hi));
    r.smallest_inputs = original_inputs;

    // The values the node reads, computed on the CPU EP by the nodes before it.
    std::vector<std::string> wanted;
    for (const auto& name : n.inputs) {
      if (!name.empty() && !graph.is_initializer(name)) wanted.push_back(name);
    }
    std::map<std::string, std::pair<int, std::vector<int64_t>>> types;
    std::vector<Tensor> node_inputs;
    const std::string feeding = write("feeding.onnx", graph.model_with_outputs(index, wanted));
    const Try fed = attempt(feeding, Device::cpu(), "the values it reads, on the CPU EP", original_inputs);
    for (const auto& name : wanted) {
      ValueSummary v{name, "", ""};
      for (const auto* list : {&fed.outputs, &fed.inputs}) {
        for (const auto& t : *list) {
          if (t.name != name || !v.type.empty()) continue;
          v.type = to_string(t.type);
          v.shape = shape_text(t.shape);
          types[name] = {onnx_type_number(t.type), t.shape};
          node_inputs.push_back(t);
        }
      }
      node.inputs.push_back(v);
    }
    for (const auto& name : n.outputs) node.outputs.push_back({name, "", ""});
    if (!fed.ran) r.notes.push_back("the values the node reads could not be computed on the CPU EP (" + fed.how + ")");

    if (fed.ran && node_inputs.size() == wanted.size() && n.outer_inputs.empty()) {
      try {
        const std::string single = write("crash_node.onnx", graph.single_node_model(index, types));
        const std::string inputs = (out_ / "crash_node_inputs.npz").string();
        detail::write_npz(inputs, node_inputs);
        const Try alone = attempt(single, o_.device, "the node alone", inputs);
        if (alone.crashed) {
          r.smallest_model = single;
          r.smallest_inputs = inputs;
          if (!alone.outputs.empty()) {
            for (size_t i = 0; i < node.outputs.size(); ++i) node.outputs[i].type = to_string(alone.outputs[i].type);
          }
        } else {
          r.notes.push_back("the node alone does not crash (" + alone.how + "): the crash needs the nodes before it; the smallest "
                            "model is the first " + std::to_string(hi) + " nodes");
        }
      } catch (const std::exception& e) {
        r.notes.push_back(std::string("the node could not be cut out alone: ") + e.what());
      }
    }
    const bool single_node = r.smallest_model.ends_with("crash_node.onnx");
    const Try on_cpu = attempt(r.smallest_model, Device::cpu(), "the smallest model on the CPU EP",
                               single_node ? r.smallest_inputs : original_inputs);
    node.on_cpu = on_cpu.crashed ? "crashes too (" + on_cpu.how + ")" : on_cpu.ran ? "runs" : "fails: " + on_cpu.how;
    r.node = node;
    std::string flags;
    for (const auto& lib : o_.config.session.custom_op_libraries) flags += " --custom-ops " + lib;
    r.reproduce = fmt::format("ortfleet start {} --devices {} --no-model-cache{}{}", r.smallest_model, o_.device.to_string(),
                              r.smallest_inputs.empty() ? "" : " --warmup-inputs " + r.smallest_inputs, flags);
    try_workarounds(r, graph, index, original_inputs);
    return finish(r);
  }

 private:
  /// What ortfleet can change itself so that the model runs: the crashing node, then every node of
  /// its op, then every node of each other op of the crashing prefix, nearest the crash first, on
  /// the CPU EP within the same session (a crash that needs the nodes before it was caused by one of
  /// them: ISNet fp16's shows at a Cast after the Resize that corrupts memory). Each try runs the
  /// whole model in a fresh process on the device with its own inputs; one works when its outputs
  /// match the CPU EP's. Nothing is applied: the working one is written as a config file, for the
  /// user to start with.
  void try_workarounds(CrashLocation& r, const onnx::OnnxGraph& graph, size_t crash_index, const std::string& inputs) {
    const onnx::GraphNode& crashing = graph.nodes()[crash_index];
    // Each try takes seconds: the search stops at 12 other ops, or once the locator has run 50 s.
    constexpr size_t kOtherOps = 12;
    constexpr double kSearchSeconds = 50;
    constexpr const char* kKey = kNodeAssignmentByName;  // cpu(name, name, ...)
    if (o_.device.kind == Device::Kind::cpu) return;  // the CPU EP is what a work-around falls back to
    if (o_.config.session.config_entries.count(kKey)) {
      r.notes.push_back(std::string("no work-around tried: the config already sets ") + kKey);
      return;
    }
    const std::string model = fs::absolute(o_.model).string();
    const Try reference = attempt(model, Device::cpu(), "the whole model on the CPU EP", inputs);
    if (!reference.ran) {
      r.notes.push_back("no work-around tried: the model does not run on the CPU EP either (" + reference.how + ")");
      return;
    }
    // Names the assignment cannot take (it splits on commas and parentheses) leave the candidate out.
    auto usable = [](const std::string& name) { return !name.empty() && name.find_first_of(",()") == std::string::npos; };
    auto every_node_of = [&](const onnx::GraphNode& like) -> std::optional<WorkaroundTry> {
      std::string names;
      size_t count = 0;
      for (const auto& n : graph.nodes()) {
        if (n.op_type != like.op_type || n.domain != like.domain || !usable(n.name)) continue;
        names += (names.empty() ? "" : ", ") + n.name;
        ++count;
      }
      if (count == 0) return std::nullopt;
      return WorkaroundTry{fmt::format("every {} node ({}) on the CPU EP", like.op_type, count), kKey, "cpu(" + names + ")", "", false};
    };
    std::vector<WorkaroundTry> candidates;
    if (usable(crashing.name)) candidates.push_back({crashing.name + " on the CPU EP", kKey, "cpu(" + crashing.name + ")", "", false});
    if (auto all = every_node_of(crashing); all && (candidates.empty() || all->config_value != candidates.back().config_value)) {
      candidates.push_back(*all);
    }
    std::set<std::pair<std::string, std::string>> ops = {{crashing.domain, crashing.op_type}};
    for (size_t i = crash_index; i-- > 0 && ops.size() <= kOtherOps;) {
      const auto& n = graph.nodes()[i];
      if (!ops.insert({n.domain, n.op_type}).second) continue;
      if (auto all = every_node_of(n)) candidates.push_back(*all);
    }
    for (size_t i = 0; i < candidates.size(); ++i) {
      auto& c = candidates[i];
      if (i >= 2 && seconds_since(start_) > kSearchSeconds) {
        r.notes.push_back(fmt::format("work-arounds: {} more ops of the crashing prefix left untried after {:.0f} s", candidates.size() - i,
                                      kSearchSeconds));
        break;
      }
      const Try t = attempt(model, o_.device, "the whole model, " + c.what, inputs, {{c.config_key, c.config_value}});
      if (t.crashed) {
        c.outcome = "crashes (" + t.how + ")";
      } else if (!t.ran) {
        c.outcome = "fails: " + t.how;
      } else {
        c.outcome = compare_with_cpu(reference.outputs, t.outputs, c.works);
      }
      r.workarounds.push_back(c);
      if (!c.works) continue;
      RunConfig working = o_.config;
      working.session.config_entries[c.config_key] = c.config_value;
      r.workaround_config = (out_ / "workaround.json").string();
      working.save(r.workaround_config);
      return;
    }
  }

  static std::string compare_with_cpu(const std::vector<Tensor>& want, const std::vector<Tensor>& got, bool& works) {
    works = false;
    if (want.size() != got.size()) return fmt::format("gives {} outputs, the CPU EP {}", got.size(), want.size());
    std::string sizes;
    for (size_t i = 0; i < want.size(); ++i) {
      const auto other = std::find_if(got.begin(), got.end(), [&](const Tensor& t) { return t.name == want[i].name; });
      if (other == got.end()) return "lacks output '" + want[i].name + "'";
      if (std::string why = detail::output_difference(want[i], *other, detail::Agreement::other_device); !why.empty()) {
        return "outputs differ from the CPU EP's: " + why;
      }
      if (std::string d = detail::largest_difference(want[i], *other); !d.empty()) sizes += (sizes.empty() ? "" : ", ") + want[i].name + " " + d;
    }
    works = true;
    return "outputs match the CPU EP's" + (sizes.empty() ? std::string() : " (" + sizes + ")");
  }

  CrashLocation& finish(CrashLocation& r) {
    r.tries = tries_;
    r.seconds = seconds_since(start_);
    return r;
  }

  const CrashLocateOptions& o_;
  std::chrono::steady_clock::time_point start_;
  std::string ortfleet_;
  fs::path out_;
  std::optional<detail::PrivateDir> first_try_;  ///< the whole model's try, before anything is written to out_
  fs::path folder_;                              ///< where tries write now: first_try_, then out_
  std::string config_path_;
  int tries_ = 0;
};

json values_json(const std::vector<ValueSummary>& values) {
  json out = json::array();
  for (const auto& v : values) out.push_back({{"name", v.name}, {"type", v.type}, {"shape", v.shape}});
  return out;
}

}  // namespace

CrashLocation locate_crash(const CrashLocateOptions& options) { return Locator(options).run(); }

std::string CrashLocation::to_json() const {
  json j = {{"model", model}, {"device", device}, {"crashed", crashed}, {"how", how},           {"nodes", nodes},
            {"tries", tries}, {"seconds", seconds}, {"smallest_model", smallest_model}, {"smallest_inputs", smallest_inputs},
            {"reproduce", reproduce}, {"notes", notes}, {"workaround_config", workaround_config}};
  j["workarounds"] = json::array();
  for (const auto& w : workarounds) {
    j["workarounds"].push_back({{"what", w.what}, {"config_key", w.config_key}, {"config_value", w.config_value}, {"outcome", w.outcome}, {"works", w.works}});
  }
  if (node) {
    j["node"] = {{"index", node->index},     {"name", node->name},         {"op_type", node->op_type},
                 {"domain", node->domain},   {"opset", node->opset},       {"attributes", node->attributes},
                 {"inputs", values_json(node->inputs)}, {"outputs", values_json(node->outputs)}, {"on_cpu", node->on_cpu}};
  }
  return j.dump(2);
}

}  // namespace ortfleet
