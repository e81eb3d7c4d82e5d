#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/shapes/shape_policy.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/diagnostics/profile.hpp"
#include "test_support.hpp"
#include "ortfleet/engine/model_file.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
std::string profile_error(const std::string& text) {
  try {
    parse_ort_profile(text, "p.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

constexpr int64_t ms = 1'000'000;
}  // namespace

TEST(Profile, OrtProfileParserAcceptsWhatOnnxRuntimeWrites) {
  const auto events = parse_ort_profile(R"([
    {"cat":"Session","name":"model_loading_uri","ts":1,"dur":100,"ph":"X","args":{}},
    {"cat":"Node","name":"conv1_kernel_time","ts":150,"dur":40,"ph":"X","args":{"op_name":"Conv","provider":"CUDAExecutionProvider"}}
  ])", "p.json");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].op, "Conv");
  EXPECT_EQ(events[1].provider, "CUDAExecutionProvider");
  EXPECT_EQ(events[1].dur_us, 40);
}

TEST(Profile, OrtProfileParserRejectsMalformedInput) {
  EXPECT_NE(profile_error("{").find("malformed ONNX Runtime profile p.json: not JSON (parse error at line 1, column 2"), std::string::npos)
      << profile_error("{");  // the JSON reader's words without its C++ name, [json.exception.parse_error.101] (issue 58's re-audit, U4)
  EXPECT_NE(profile_error(R"({"cat": "Node"})").find("expected an array"), std::string::npos);
  EXPECT_NE(profile_error("[1]").find("event 0 is not an object"), std::string::npos);
  EXPECT_NE(profile_error(R"([{"cat":"Node","name":"x","ts":1}])").find("event 0 has no \"dur\""), std::string::npos);
  EXPECT_NE(profile_error(R"([{"cat":"Node","name":"x","ts":"1","dur":2}])").find("wrong type"), std::string::npos);
  EXPECT_NE(profile_error(R"([{"cat":"Node","name":"x","ts":1,"dur":-2}])").find("negative duration"), std::string::npos);
}

// Where the disk has room, a file of ONNX Runtime's that cannot be read or parsed is named as such; on a
// full disk it is said as the full disk (tests/cli/full_disk.sh, on a 600 kB tmpfs).
TEST(Profile, OnnxRuntimesFilesThatCannotBeReadAreNamedWhereTheDiskHasRoom) {
  const fs::path dir = fs::path(testing::TempDir()) / "ort-files-unread";
  fs::create_directories(dir);
  std::ofstream((dir / "cut.json").string()) << "[{\"cat\":";
  const std::string missing = test::error_of([&] { read_ort_log((dir / "none.jsonl").string()); });
  EXPECT_EQ(missing.rfind("cannot read ONNX Runtime's log " + (dir / "none.jsonl").string(), 0), 0u) << missing;
  const std::string cut = test::error_of([&] { read_ort_profile((dir / "cut.json").string()); });
  EXPECT_NE(cut.find("malformed ONNX Runtime profile " + (dir / "cut.json").string() + ": not JSON"), std::string::npos) << cut;
  fs::remove_all(dir);
}

TEST(Profile, LogParserNamesTheBadLine) {
  EXPECT_EQ(parse_ort_log(R"({"t":5,"severity":1,"message":"hi"})" "\n\n", "l").size(), 1u);
  try {
    parse_ort_log(R"({"t":5,"severity":1,"message":"hi"})" "\n{\"t\": 6}\n", "log.jsonl");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("log.jsonl line 2: key 'severity' not found"), std::string::npos) << e.what();
  }
}

namespace {
/// A start of m.onnx on `device`, spawned at 0 and in main() at `main_ms`, ready; its timeline holds
/// process.start so far.
StartReport start_on(const Device& device, int64_t main_ms) {
  StartReport start;
  start.model = "m.onnx";
  start.spawn_ns = 0;
  start.main_ns = main_ms * ms;
  DeviceStatus d;
  d.device = device;
  d.state = DeviceState::ready;
  start.devices = {d};
  start.timeline = Timeline(0);
  start.timeline.add({phase::process_start, "process", 0, main_ms * ms, 1, {}});
  return start;
}

/// A GPU start whose timings are known exactly, with ONNX Runtime's log and profile of it.
ProfileReport known_profile() {
  StartReport start = start_on(Device::cuda(0), 2);
  start.timeline.add({phase::runtime_load, "process", 10 * ms, 40 * ms, 1, {}});
  start.timeline.add({phase::ep_register, "cuda:0", 40 * ms, 140 * ms, 1, {}});
  start.timeline.add({phase::cuda_context, "cuda:0", 140 * ms, 240 * ms, 1, {}});
  start.timeline.add({phase::session_create, "cuda:0", 240 * ms, 1240 * ms, 1, {}});
  start.timeline.add({phase::warmup, "cuda:0", 1240 * ms, 1740 * ms, 1, {{"run", "1"}}});
  start.timeline.add({phase::warmup, "cuda:0", 1740 * ms, 1750 * ms, 1, {{"run", "2"}}});
  start.timeline.add({phase::warmup, "cuda:0", 1750 * ms, 1762 * ms, 1, {{"run", "3"}}});
  const std::vector<OrtLogLine> log = {
      {440 * ms, 1, "Initializing session."},
      {500 * ms, 1, "Applying graph transformer ConstantFolding on step 1."},
      {700 * ms, 1, "GraphTransformer ConstantFolding modified: 1 with status: OK"},
      {700 * ms, 1, "Applying graph transformer GeluFusion on step 1."},
      {750 * ms, 1, "GraphTransformer GeluFusion modified: 0 with status: OK"},
      {900 * ms, 1, "Saving initialized tensors."},
      {1100 * ms, 1, "Done saving initialized tensors"},
      {1200 * ms, 1, "Session successfully initialized."},
  };
  const std::vector<OrtProfileEvent> ort = {
      {"Session", "session_initialization", 0, 1000, "", ""},
      {"Session", "model_run", 2000, 500, "", ""},
      {"Node", "conv_kernel_time", 2010, 400, "Conv", "CUDAExecutionProvider"},
      {"Node", "shape_kernel_time", 2450, 5, "Shape", "CPUExecutionProvider"},
      {"Session", "model_run", 3000, 10, "", ""},
      {"Node", "conv_kernel_time", 3001, 4, "Conv", "CUDAExecutionProvider"},
      {"Node", "shape_kernel_time", 3006, 1, "Shape", "CPUExecutionProvider"},
  };
  ModelFacts facts;
  facts.initializer_bytes = 400'000'000;
  return build_profile(start, log, ort, facts);
}
}  // namespace

// Phases from a start whose timings are known exactly: every millisecond lands where it belongs.
TEST(Profile, AttributesTheColdStartToNamedPhases) {
  const ProfileReport r = known_profile();
  std::map<std::string, double> p;
  for (const auto& phase : r.phases) p[phase.name] = phase.ms;
  EXPECT_DOUBLE_EQ(r.wall_ms, 1740);
  EXPECT_DOUBLE_EQ(p["process.start"], 2);
  EXPECT_DOUBLE_EQ(p["tool.setup"], 8);
  EXPECT_DOUBLE_EQ(p["runtime.load"], 30);
  EXPECT_DOUBLE_EQ(p["ep.register"], 100);
  EXPECT_DOUBLE_EQ(p["cuda.context"], 100);
  EXPECT_DOUBLE_EQ(p["model.load"], 200);
  EXPECT_DOUBLE_EQ(p["session.setup"], 60);
  EXPECT_DOUBLE_EQ(p["graph.optimization"], 250);
  EXPECT_DOUBLE_EQ(p["partitioning"], 150);
  EXPECT_DOUBLE_EQ(p["initializer.upload"], 200);
  EXPECT_DOUBLE_EQ(p["kernel.creation"], 100);
  EXPECT_DOUBLE_EQ(p["session.other"], 40);
  EXPECT_DOUBLE_EQ(p["warmup"], 500);
  EXPECT_DOUBLE_EQ(p["session.create"], 1000);  // the timeline's own phase, its steps under it
  EXPECT_NEAR(r.attributed_ms, 1740, 1e-9);  // every millisecond from exec to the first inference's end
  EXPECT_NEAR(r.upload_gb_per_s, 2.0, 1e-9);
  ASSERT_EQ(r.transformers.size(), 2u);
  EXPECT_EQ(r.transformers[0].first, "ConstantFolding");
  EXPECT_DOUBLE_EQ(r.transformers[0].second, 200);
  EXPECT_EQ(r.conv_nodes, 1);
  EXPECT_DOUBLE_EQ(r.conv_first_ms, 0.4);
  EXPECT_DOUBLE_EQ(r.conv_steady_ms, 0.004);
  EXPECT_EQ(r.cpu_fallback, std::vector<std::string>{"Shape"});
  EXPECT_EQ(r.placement.at("CUDAExecutionProvider"), 1);
  EXPECT_DOUBLE_EQ(r.steady_p50_ms, 11);
  ASSERT_EQ(r.top_costs.size(), 3u);
  EXPECT_EQ(r.top_costs[0].rfind("first inference (warm-up): 500 ms", 0), 0u) << r.top_costs[0];
  EXPECT_TRUE(nlohmann::json::parse(r.to_json()).contains("phases"));
  // ONNX Runtime's events joined our timeline, aligned on the end of session creation.
  bool aligned = false;
  for (const auto& e : r.timeline.events()) aligned = aligned || (e.name == "session_initialization" && e.end_ns == 1240 * ms);
  EXPECT_TRUE(aligned);
}

// profile's phases are the start's own: each is a phase of its timeline with the same boundaries (what
// `ortfleet start` shows), the gap before the first is named, and ONNX Runtime's steps split session
// creation under it, adding up to it.
TEST(Profile, ItsPhasesAreTheTimelinesOwnWithTheSameBoundaries) {
  const ProfileReport r = known_profile();
  const auto events = r.timeline.events();
  std::set<std::string> matched;
  double steps_ms = 0;
  for (const auto& p : r.phases) {
    if (!p.parent.empty()) {
      EXPECT_EQ(p.parent, phase::session_create) << p.name;
      steps_ms += p.ms;
      continue;
    }
    if (p.name == "tool.setup") {
      EXPECT_DOUBLE_EQ(p.start_ms, 2);  // main(), where process.start ends
      EXPECT_DOUBLE_EQ(p.ms, 8);        // to the first of ortfleet's phases
      continue;
    }
    const auto event = std::find_if(events.begin(), events.end(), [&](const TimelineEvent& e) {
      return e.name == p.name && static_cast<double>(e.start_ns) / 1e6 == p.start_ms;
    });
    ASSERT_NE(event, events.end()) << p.name << " at " << p.start_ms << " ms is no phase of the start's timeline";
    EXPECT_DOUBLE_EQ(p.ms, event->duration_ms()) << p.name;
    matched.insert(p.name);
  }
  EXPECT_EQ(matched, (std::set<std::string>{"process.start", "runtime.load", "ep.register", "cuda.context", "session.create", "warmup"}));
  ASSERT_NE(r.phase("session.create"), nullptr);
  EXPECT_DOUBLE_EQ(steps_ms, r.phase("session.create")->ms);
}

// The top costs are what the user can change: never the exec to main() or the command's own set-up,
// however large, and a phase's steps rather than the phase they split.
TEST(Profile, RanksOnlyWhatTheUserCanChange) {
  StartReport start = start_on(Device::cpu(), 300);
  start.timeline.add({phase::runtime_load, "process", 900 * ms, 1000 * ms, 1, {}});  // 600 ms of set-up before it
  start.timeline.add({phase::session_create, "cpu", 1000 * ms, 1400 * ms, 1, {}});
  start.timeline.add({phase::warmup, "cpu", 1400 * ms, 1450 * ms, 1, {{"run", "1"}}});
  const std::vector<OrtLogLine> log = {
      {1100 * ms, 1, "Initializing session."},
      {1110 * ms, 1, "Applying graph transformer ConstantFolding on step 1."},
      {1310 * ms, 1, "GraphTransformer ConstantFolding modified: 1 with status: OK"},
      {1320 * ms, 1, "Saving initialized tensors."},
      {1330 * ms, 1, "Done saving initialized tensors"},
      {1390 * ms, 1, "Session successfully initialized."},
  };
  const ProfileReport r = build_profile(start, log, {}, ModelFacts{});
  ASSERT_EQ(r.top_costs.size(), 3u);
  EXPECT_EQ(r.top_costs[0].rfind("graph optimisation: 200 ms", 0), 0u) << r.top_costs[0];
  EXPECT_EQ(r.top_costs[1].rfind("ONNX Runtime library load: 100 ms", 0), 0u) << r.top_costs[1];
  for (const auto& cost : r.top_costs) {
    EXPECT_EQ(cost.find("set-up"), std::string::npos) << cost;
    EXPECT_EQ(cost.find("process start"), std::string::npos) << cost;
    EXPECT_EQ(cost.find("session creation:"), std::string::npos) << cost;  // split into its steps
  }
  ASSERT_NE(r.phase("tool.setup"), nullptr);
  EXPECT_DOUBLE_EQ(r.phase("tool.setup")->ms, 600);  // shown, with its share, not advised on
  EXPECT_FALSE(r.phase("tool.setup")->actionable);
}

// The floor: process start + max(EP side, cuInit + context) + weights at the bus's speed + one
// steady inference and the conv search; each term beside what the start spent on the same work.
TEST(Profile, TheFloorAddsUpItsTermsAndComparesEachWithTheStart) {
  ProfileReport r = known_profile();
  MachineSpeeds speeds;
  speeds.upload_gb_per_s = 20;
  speeds.cuda_init_ms = 50;  // the sequential start ran cuInit inside the EP's registration
  add_floor(r, speeds);
  ASSERT_EQ(r.floor.size(), 4u);
  std::map<std::string, FloorTerm> t;
  for (const auto& term : r.floor) t[term.name] = term;
  EXPECT_DOUBLE_EQ(t["process"].floor_ms, 2);
  EXPECT_DOUBLE_EQ(t["process"].measured_ms, 10);
  // EP side: runtime 30 + registration 100 less cuInit 50 = 80; CUDA side: cuInit 50 + context 100.
  EXPECT_DOUBLE_EQ(t["runtime"].floor_ms, 150);
  EXPECT_DOUBLE_EQ(t["runtime"].measured_ms, 230);
  EXPECT_DOUBLE_EQ(t["session"].floor_ms, 20);  // 0.4 GB at 20 GB/s
  EXPECT_DOUBLE_EQ(t["session"].measured_ms, 1000);
  EXPECT_DOUBLE_EQ(t["session"].ratio(), 50);
  EXPECT_NEAR(t["inference"].floor_ms, 11 + 0.396, 1e-9);  // steady p50 + the conv search
  EXPECT_DOUBLE_EQ(t["inference"].measured_ms, 500);
  EXPECT_NEAR(r.floor_ms, 2 + 150 + 20 + 11.396, 1e-9);
  EXPECT_NEAR(r.floor_ratio(), 1740 / r.floor_ms, 1e-9);
  const auto j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j.at("floor").at("terms").size(), 4u);
  EXPECT_NEAR(j.at("floor_ratio").get<double>(), r.floor_ratio(), 1e-9);
}

TEST(Profile, WithoutAMeasuredBandwidthTheWeightsHaveNoFloor) {
  ProfileReport r = known_profile();
  add_floor(r, {});
  for (const auto& term : r.floor) {
    if (term.name == "session") {
      EXPECT_DOUBLE_EQ(term.floor_ms, 0);
    }
  }
  EXPECT_GT(r.floor_ms, 0);
}

// A dynamic batch dim: profile measures what a batch switch costs one ONNX Runtime session.
TEST(Profile, MeasuresAShapeSwitchOnlyForADynamicBatch) {
  ProfileOptions o;
  o.model = test::dynamic_mlp_model();
  o.steady_runs = 3;
  o.shape_switch_seconds = 0.2;
  o.ortfleet_executable = test::bin("ortfleet");
  const ProfileReport dynamic = run_profile(o);
  const ShapeSwitchCost& c = dynamic.shape_switch;
  ASSERT_TRUE(c.measured());
  EXPECT_GT(c.call_ms, 0.0);
  EXPECT_GT(c.steady_call_ms, 0.0);
  EXPECT_DOUBLE_EQ(c.cost_ms, std::max(0.0, c.call_ms - c.steady_call_ms));
  // The device's one shape advice, as doctor and tune give it: on the CPU one session serves every shape.
  EXPECT_EQ(dynamic.shapes_advice.rfind(detail::shape_advice(Device::cpu()), 0), 0u) << dynamic.shapes_advice;
  o.model = test::mlp_model();
  EXPECT_FALSE(run_profile(o).shape_switch.measured());  // fixed batch: nothing to switch
}

TEST(Profile, RunsAColdStartInAFreshProcessAndAttributesMostOfIt) {
  ProfileOptions o;
  o.model = test::resnet18_model();
  o.steady_runs = 3;
  o.ortfleet_executable = test::bin("ortfleet");
  const ProfileReport r = run_profile(o);
  EXPECT_GT(r.wall_ms, 0.0);
  // Every phase of the start's own is the timeline's, with its boundaries, in the real start too.
  const auto events = r.timeline.events();
  for (const auto& p : r.phases) {
    if (!p.parent.empty() || p.name == "tool.setup") continue;
    const bool same = std::any_of(events.begin(), events.end(), [&](const TimelineEvent& e) {
      return e.name == p.name && std::abs(static_cast<double>(e.start_ns - r.timeline.origin_ns()) / 1e6 - p.start_ms) < 1e-6 &&
             std::abs(e.duration_ms() - p.ms) < 1e-6;
    });
    EXPECT_TRUE(same) << p.name << " differs from the timeline's phase of that name";
  }
  // ONNX Runtime is loaded where the timeline says (its runtime.load), not before it: the command's
  // own set-up before the first phase is the smaller part (it took 107 ms against 0.8 ms when the
  // runtime was loaded early, for ONNX Runtime's log).
  ASSERT_NE(r.phase("runtime.load"), nullptr);
  ASSERT_NE(r.phase("tool.setup"), nullptr);
  EXPECT_GT(r.phase("runtime.load")->ms, r.phase("tool.setup")->ms) << r.to_json();
  EXPECT_GE(r.attributed_share(), 0.9) << r.to_json();
  EXPECT_LE(r.attributed_share(), 1.0 + 1e-9);
  bool graph = false;
  for (const auto& p : r.phases) graph = graph || p.name == "graph.optimization";
  EXPECT_TRUE(graph);
  EXPECT_GT(r.conv_nodes, 0);
  EXPECT_TRUE(r.ort_profile_path.empty());  // its temporary folder is gone: nothing to point at
  EXPECT_GT(r.steady_p50_ms, 0.0);
  // On the CPU the floor's weights term comes from reading the model's files again.
  EXPECT_GT(r.speeds.read_gb_per_s, 0.0);
  ASSERT_EQ(r.floor.size(), 4u);
  EXPECT_GT(r.floor_ms, 0.0);
}

// The child's profile and log go into a folder only we can enter, with a name nobody can guess, and
// it is removed at the end; a folder the user names (--keep) is kept, and refused if others can write it.
TEST(Profile, WorksInAPrivateFolderThatItRemovesUnlessAskedToKeepIt) {
  const fs::path tmp = test::scratch_dir() / "profile-tmp";
  // What another user would plant at the name a predictable scheme picks: it must be left alone.
  const std::string planted = "ortfleet-profile-" + std::to_string(::getpid());
  fs::create_directories(tmp / planted);
  const test::ScopedEnv tmpdir("TMPDIR", tmp.string());
  ProfileOptions o;
  o.model = test::mlp_model();
  o.steady_runs = 1;
  o.ortfleet_executable = test::bin("ortfleet");
  run_profile(o);
  EXPECT_TRUE(fs::is_empty(tmp / planted)) << "the profile was written into a folder someone else made";
  EXPECT_EQ(test::ortfleet_files_in(tmp), std::vector<std::string>{planted}) << "the work folder was left behind";

  o.work_dir = (test::scratch_dir() / "profile-kept").string();
  const ProfileReport kept = run_profile(o);
  EXPECT_TRUE(fs::exists(fs::path(o.work_dir) / "ort-log.jsonl"));
  EXPECT_EQ(fs::path(kept.ort_profile_path).parent_path(), fs::path(o.work_dir));
  EXPECT_TRUE(fs::exists(kept.ort_profile_path));

  const fs::path open = test::scratch_dir() / "profile-open";
  fs::create_directories(open);
  fs::permissions(open, fs::perms::all);
  o.work_dir = open.string();
  const std::string refused = test::error_from([&] { run_profile(o); }).what();
  EXPECT_NE(refused.find(open.string() + " can be written by other users"), std::string::npos) << refused;
}

}  // namespace ortfleet
