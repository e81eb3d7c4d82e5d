#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ortfleet/base/error.hpp"
#include "ortfleet/diagnostics/throughput.hpp"
#include "ortfleet/engine/shape_grammar.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
ThroughputOptions on_one_cpu(const std::string& model, double seconds) {
  ThroughputOptions o;
  o.model = model;
  o.devices = {Device::cpu()};
  o.seconds = seconds;
  return o;
}

/// A stream of the test segmenter's image sizes on the CPU: `count` calls, the buckets row in `rounds`.
ThroughputOptions segmenter_stream(int count, int rounds) {
  ThroughputOptions o = on_one_cpu(test::segmenter_model(), ThroughputOptions{}.seconds);
  o.shape_stream = "image=1x3x[16:48:8]x[16:48:8]";
  o.stream_count = count;
  o.stream_rounds = rounds;
  return o;
}

}  // namespace

TEST(Throughput, OverDevicesAndThreadsInThisProcessAndInWorkers) {
  ThroughputOptions o;
  o.model = test::mlp_model();
  o.devices = {Device::cpu(0), Device::cpu(1)};
  o.seconds = 0.3;
  const ThroughputReport r = run_throughput(o);
  // 1 device in process, 1 device through a worker, 2 threads on one session, 2 devices in process,
  // 2 devices through workers; then the round trips: ring, 8 in flight through the ring, socket, in process.
  ASSERT_EQ(r.rows.size(), 9u);
  for (const auto& row : r.rows) {
    EXPECT_TRUE(row.error.empty()) << row.label << ": " << row.error;
    EXPECT_GT(row.inferences_per_s, 0.0) << row.label;
    EXPECT_LE(row.p50_ms, row.p99_ms);
  }
  // The model's own batch (1), host inputs: the only inputs on CPU devices.
  EXPECT_EQ(r.rows[0].label, "1 device, 1 thread, in this process, batch 1, host inputs");
  EXPECT_EQ(r.rows[1].label, "1 device, 1 thread, a worker process, batch 1, host inputs");
  EXPECT_EQ(r.rows[2].label, "1 device, 2 threads on one session, in this process, batch 1, host inputs");
  EXPECT_EQ(r.rows[3].label, "2 devices, one session each, in this process, batch 1, host inputs");
  EXPECT_EQ(r.rows[4].label, "2 devices, one session each, a worker process each, batch 1, host inputs");
  EXPECT_DOUBLE_EQ(r.rows[0].speedup, 1.0);
  EXPECT_EQ(r.rows[2].threads, 2);
  EXPECT_EQ(r.rows[3].devices, 2);
  EXPECT_EQ(r.rows[4].devices, 2);
  // The worker rows against the in-process rows of as many devices.
  EXPECT_DOUBLE_EQ(r.rows[1].vs_in_process, r.rows[1].inferences_per_s / r.rows[0].inferences_per_s);
  EXPECT_DOUBLE_EQ(r.rows[4].vs_in_process, r.rows[4].inferences_per_s / r.rows[3].inferences_per_s);
  EXPECT_EQ(r.rows[3].vs_in_process, 0.0);
  EXPECT_EQ(nlohmann::json::parse(r.to_json())["rows"].size(), 9u);
  EXPECT_EQ(r.rows[5].label, "worker round trip, identity batch 1, request ring");
  EXPECT_EQ(r.rows[7].label, "worker round trip, identity batch 1, socket");
  EXPECT_EQ(r.rows[6].threads, 1);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes.back().find("round trip (identity model, batch 1, cpu"), std::string::npos) << r.notes.back();
}

// The round trips through the ring and through the socket were chosen by setenv(ORTFLEET_WORKER_RING)
// around each fleet's start (issue 50): setenv while other threads read the environment is the race
// that crashed a CI run. Each fleet is told instead, and the environment is never written.
TEST(Throughput, TheRoundTripsChooseTheirPathWithoutWritingTheEnvironment) {
  const test::ScopedEnv unset("ORTFLEET_WORKER_RING", std::nullopt);
  std::atomic<bool> done{false};
  std::atomic<int> seen_set{0};
  std::thread watcher([&] {
    while (!done) {
      if (std::getenv("ORTFLEET_WORKER_RING") != nullptr) ++seen_set;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  ThroughputOptions o = on_one_cpu(test::mlp_model(), 0.1);
  const ThroughputReport r = run_throughput(o);
  done = true;
  watcher.join();
  EXPECT_EQ(seen_set.load(), 0) << "the environment was written while the bench ran";
  const auto socket = std::find_if(r.rows.begin(), r.rows.end(), [](const ThroughputRow& row) { return row.label.find("socket") != std::string::npos; });
  ASSERT_NE(socket, r.rows.end());
  EXPECT_TRUE(socket->error.empty()) << socket->error;
  EXPECT_GT(socket->inferences_per_s, 0.0);
}

// Rows for each batch asked for; on CPU devices, host inputs only: the device-input rows are left out
// with a note, not failed.
TEST(Throughput, ARowSetForEachBatchAndNoDeviceInputsWithoutAGpu) {
  ThroughputOptions o = on_one_cpu(test::dynamic_mlp_model(), 0.2);
  o.batches = {1, 32};
  const ThroughputReport r = run_throughput(o);
  ASSERT_EQ(r.rows.size(), 8u);  // in process and through a worker, at batch 1 and 32; the round trips
  EXPECT_EQ(r.rows[0].label, "1 device, 1 thread, in this process, batch 1, host inputs");
  EXPECT_EQ(r.rows[1].label, "1 device, 1 thread, a worker process, batch 1, host inputs");
  EXPECT_EQ(r.rows[2].label, "1 device, 1 thread, in this process, batch 32, host inputs");
  EXPECT_EQ(r.rows[3].label, "1 device, 1 thread, a worker process, batch 32, host inputs");
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(r.rows[i].error.empty()) << r.rows[i].label << ": " << r.rows[i].error;
    EXPECT_EQ(r.rows[i].batch, i < 2 ? 1 : 32);
    EXPECT_EQ(r.rows[i].inputs, "host");
  }
  EXPECT_DOUBLE_EQ(r.rows[2].speedup, 1.0);  // each batch against its own in-process row
  // What crossed to the worker, counted over its row: host tensors through shared memory, nothing else.
  EXPECT_GT(r.rows[3].host_bytes, 0u);
  EXPECT_EQ(r.rows[3].ipc_bytes + r.rows[3].staged_bytes, 0u);
  EXPECT_EQ(r.rows[2].host_bytes, 0u);  // a session in this process: nothing crossed
  for (const auto& row : r.rows) EXPECT_EQ(row.label.find("device inputs"), std::string::npos) << row.label;
  const auto has_note = [&](const std::string& text) {
    return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(has_note("workers reach ")) << r.notes.front();
  EXPECT_TRUE(has_note("x in-process (1 CPU device, batch 32, host inputs); 0 MB crossed by CUDA IPC"));
  EXPECT_TRUE(has_note("not run: rows with inputs already on the device"));
  const auto j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j["rows"][2]["batch"], 32);
  EXPECT_EQ(j["rows"][2]["inputs"], "host");
}

TEST(Throughput, BatchSizesMustBePositive) {
  ThroughputOptions o = on_one_cpu(test::dynamic_mlp_model(), 0.1);
  o.batches = {1, 0};
  try {
    run_throughput(o);
    FAIL() << "batch 0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch sizes must be positive (got 0)"), std::string::npos) << e.what();
  }
}

TEST(Throughput, AShapeMixThroughOneSessionAndThroughShapeAwareSessions) {
  ThroughputOptions o;
  o.model = test::dynamic_mlp_model();
  o.devices = {Device::cpu()};
  o.seconds = 0.3;
  o.shape_mix = {1, 2, 1};
  o.anchors = false;
  const ThroughputReport r = run_throughput(o);
  ASSERT_EQ(r.rows.size(), 4u);  // batch 1 alone, batch 2 alone, one session, shape-aware
  EXPECT_EQ(r.rows[0].label, "same shape, batch 1");
  EXPECT_EQ(r.rows[1].label, "same shape, batch 2");
  EXPECT_EQ(r.rows[2].label, "one session, shape mix 1,2,1");
  EXPECT_EQ(r.rows[3].label, "shape-aware, shape mix 1,2,1");
  EXPECT_EQ(r.rows[2].sessions, 1);  // ONNX Runtime's own behaviour: one session for every shape
  EXPECT_EQ(r.rows[3].sessions, 2);  // one per shape
  for (const auto& row : r.rows) {
    EXPECT_GT(row.inferences_per_s, 0.0) << row.label;
    EXPECT_GT(row.first_call_ms, 0.0) << row.label;
    EXPECT_LE(row.p50_ms, row.p99_ms) << row.label;
  }
  EXPECT_DOUBLE_EQ(r.rows[2].speedup, 1.0);  // compared with the one-session row
  ASSERT_GE(r.notes.size(), 3u);
  EXPECT_NE(r.notes[0].find("shape-aware is"), std::string::npos);
  EXPECT_NE(r.notes[1].find("the same-shape p50 of batch 2"), std::string::npos);
  const auto j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j["rows"].size(), 4u);
  EXPECT_EQ(j["rows"][3]["sessions"], 2);
}

TEST(Throughput, AShapeStreamRowKeepsEveryCallsTimeInOrder) {
  ThroughputOptions o = segmenter_stream(6, 2);
  o.config.shapes.buckets = {parse_buckets("image.2=32,48"), parse_buckets("image.3=32,48")};
  o.anchors = false;
  const ThroughputReport r = run_throughput(o);
  ASSERT_FALSE(r.rows.empty());
  const auto j = nlohmann::json::parse(r.to_json());
  int measured = 0;
  bool bucketed = false;
  for (const auto& row : j["rows"]) {
    if (!row["error"].get<std::string>().empty()) continue;
    ++measured;
    // The buckets row runs the stream once per round; its stream time is a round's mean.
    const bool rounds = row["label"].get<std::string>().rfind("buckets", 0) == 0;
    bucketed = bucketed || rounds;
    ASSERT_EQ(row["calls_ms"].size(), rounds ? 12u : 6u) << row["label"];
    double sum = 0;
    for (const auto& ms : row["calls_ms"]) {
      EXPECT_GT(ms.get<double>(), 0.0) << row["label"];
      sum += ms.get<double>();
    }
    EXPECT_NEAR(sum, row["stream_ms"].get<double>() * (rounds ? 2 : 1), 1e-6 * sum + 1e-9) << row["label"];
  }
  EXPECT_GE(measured, 3) << r.to_json();  // one session, the default policy and the buckets
  EXPECT_TRUE(bucketed) << r.to_json();
  const std::string notes = j["notes"].dump();
  EXPECT_NE(notes.find("(each of 2 rounds: "), std::string::npos) << notes;
  EXPECT_NE(notes.find("the steady calls of its bucket shapes alone: p99"), std::string::npos) << notes;
  EXPECT_NE(notes.find("the slowest padded call ("), std::string::npos) << notes;
  EXPECT_NE(notes.find("the stream's calls, each repeated in a row (no move to another bucket's session between them): p50 "), std::string::npos)
      << notes;
}

// onnxruntime's Python API runs before ortfleet's rows and after them, and the notes set ortfleet
// against the two runs' mean. A stand-in interpreter answers as the anchor does: a first run 100 ms
// a call (steady 2 ms), a second 300 ms (steady 4 ms).
TEST(Throughput, AShapeStreamBracketsOrtfleetsRowsWithTwoPythonRuns) {
  const fs::path dir = test::fresh_dir("python-brackets");
  const fs::path python = dir / "python";
  {
    std::ofstream script(python);
    script << "#!/bin/sh\n"
              "[ \"$1\" = -c ] && { echo 1.30.0; exit 0; }\n"
              "while [ $# -gt 0 ]; do [ \"$1\" = --shape-stream ] && stream=$2; shift; done\n"
              "n=$(grep -o '{' \"$stream\" | wc -l)\n"
              "ms=100; steady=2; [ -e \"" << (dir / "ran").string() << "\" ] && { ms=300; steady=4; }\n"
              "touch \"" << (dir / "ran").string() << "\"\n"
              "list=$ms; i=1; while [ $i -lt $n ]; do list=\"$list,$ms\"; i=$((i+1)); done\n"
              "echo \"{\\\"ortfleet_stream_row\\\": 1, \\\"ms\\\": [$list], \\\"steady_p50_ms\\\": $steady}\"\n";
  }
  fs::permissions(python, fs::perms::owner_all);
  ThroughputOptions o = segmenter_stream(4, 1);
  o.python = python.string();
  const ThroughputReport r = run_throughput(o);
  std::vector<std::string> python_rows;
  for (const auto& row : r.rows) {
    if (row.label.rfind("python onnxruntime", 0) != 0) continue;
    EXPECT_EQ(row.error, "") << row.label;
    python_rows.push_back(row.label);
  }
  ASSERT_EQ(python_rows.size(), 2u) << r.to_json();
  EXPECT_NE(python_rows[0].find("(before ortfleet's rows)"), std::string::npos) << python_rows[0];
  EXPECT_NE(python_rows[1].find("(after ortfleet's rows)"), std::string::npos) << python_rows[1];
  const std::string notes = nlohmann::json(r.notes).dump();
  EXPECT_NE(notes.find("the stream took 400 ms and 1200 ms (before and after ortfleet's rows)"), std::string::npos) << notes;
  EXPECT_NE(notes.find("than their mean"), std::string::npos) << notes;
  EXPECT_NE(notes.find("2 ms and 4 ms (before and after ortfleet's rows) in onnxruntime's Python API"), std::string::npos) << notes;
  // The ratio is to the mean, 3 ms: whatever ortfleet's steady call took, the note's ratio is 3 over it
  // (faster), written with two decimals.
  const auto at = notes.find("call overhead: a steady call of ");
  ASSERT_NE(at, std::string::npos) << notes;
  const auto takes = notes.find(" takes ", at) + 7;
  const double ours = std::stod(notes.substr(takes));
  const auto colon = notes.find("settings: ", at) + 10;
  EXPECT_NE(notes.find("x faster than their mean", colon), std::string::npos) << notes;
  EXPECT_NEAR(std::stod(notes.substr(colon)), 3.0 / ours, 0.006 + 3.0 / ours * 0.01) << notes;
  fs::remove_all(dir);
}

// Issue 58: the stream bench advised buckets for an attention block without a mask, whose outputs
// padding changes. Its buckets row is refused now, saying why, and no buckets are advised.
TEST(Throughput, AShapeStreamAdvisesNoBucketsThatChangeTheModelsOutputs) {
  ThroughputOptions o = on_one_cpu(test::attention_model(), ThroughputOptions{}.seconds);
  o.shape_stream = "x=1x[8:128:8]x64";
  o.stream_count = 12;
  o.stream_rounds = 1;
  o.anchors = false;
  const ThroughputReport r = run_throughput(o);
  const auto buckets = std::find_if(r.rows.begin(), r.rows.end(), [](const ThroughputRow& row) { return row.label.rfind("buckets ", 0) == 0; });
  ASSERT_NE(buckets, r.rows.end()) << r.to_json();
  EXPECT_NE(buckets->error.find("refused: padding changes the model's outputs"), std::string::npos) << buckets->error;
  const std::string notes = nlohmann::json(r.notes).dump();
  EXPECT_NE(notes.find("no buckets advised: padding changes this model's outputs (x.1 = "), std::string::npos) << notes;
  EXPECT_EQ(notes.find("the steady p50 of the bucket shapes"), std::string::npos) << notes;
}

TEST(Throughput, AShapeMixNeedsAModelWithADynamicBatch) {
  ThroughputOptions o;
  o.model = test::mlp_model();  // batch fixed at 1
  o.devices = {Device::cpu()};
  o.seconds = 0.1;
  o.shape_mix = {1, 2};
  o.anchors = false;
  try {
    run_throughput(o);
    FAIL() << "a shape mix on a fixed-batch model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no input of this model has a dynamic first dim"), std::string::npos) << e.what();
  }
}

}  // namespace ortfleet
