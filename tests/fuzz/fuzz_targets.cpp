#include "fuzz_targets.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/runtime/ort_errors.hpp"
#include "engine/files/ort_format_file.hpp"
#include "fleet/pool/pool_protocol.hpp"
#include "fleet/pool/pool_requests.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "process/ipc.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/diagnostics/profile.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/options.hpp"
#include "ortfleet/fleet/start_report.hpp"
#include "synth/onnx_writer.hpp"

namespace ortfleet::fuzz {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

/// The wire messages arrive as JSON (MessageChannel reports unparsable text as a malformed message):
/// bytes that are not JSON do not reach these parsers.
template <class Parse>
void with_json(std::string_view bytes, Parse parse) {
  const json j = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) parse(j);
}

std::shared_ptr<detail::SharedBuffer> tensor_buffer() {
  static const auto buffer = detail::SharedBuffer::create(4096);
  return buffer;
}

std::string model_bytes(onnx::ProtoMessage model) {
  std::ostringstream out;
  model.write(out);
  return out.str();
}

/// y = Relu(x + w) with w inline (dims packed and unpacked) or in external data.
std::string small_model(bool external) {
  onnx::GraphParts g;
  g.name = "fuzz";
  g.nodes.push_back(onnx::node("Add", "add", {"x", "w"}, {"s"}));
  g.nodes.push_back(onnx::node("Relu", "relu", {"s"}, {"y"}, {onnx::Attribute::Ints("unused", {1, 2})}));
  if (external) {
    g.initializers.push_back(onnx::external_tensor("w", onnx::DataType::float32, {1, 4}, {"w.bin", 0, 16}));
  } else {
    g.initializers.push_back(onnx::tensor("w", onnx::DataType::float32, {1, 4}, 16, [](std::ostream& o) { o << std::string(16, '\1'); }));
  }
  g.initializers.push_back(onnx::int64_tensor("shape", {2}, {1, 4}));
  g.inputs.push_back(onnx::value_info("x", onnx::DataType::float32, {"batch", 4}));
  g.outputs.push_back(onnx::value_info("y", onnx::DataType::float32, {"batch", 4}));
  return model_bytes(onnx::model(std::move(g), 17, {{"k", "v"}}));
}

/// One scratch file per process for the model targets (the model parsers read files).
const fs::path& model_path() {
  static const fs::path path = fs::temp_directory_path() / ("ortfleet-fuzz-" + std::to_string(::getpid()) + ".onnx");
  static const struct Remove {
    ~Remove() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } remove;
  return path;
}

/// A minimal ORT-format model, written by hand (no ONNX Runtime needed): InferenceSession.model ->
/// Model.graph -> Graph.initializers -> one Tensor {name "w", dims [1, 4], float, 16 raw bytes}.
/// Each vtable sits just before its table; every offset points forward, as FlatBuffers require.
std::string ort_format_seed() {
  std::string b(8, '\0');
  std::memcpy(b.data() + 4, "ORTM", 4);
  auto put32 = [&](uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  auto patch = [&](size_t at, size_t target) {
    const auto v = static_cast<uint32_t>(target - at);
    std::memcpy(b.data() + at, &v, 4);
  };
  // A vtable of `fields` (offsets in the table, 0 for absent) and its table of `table_bytes`; returns
  // the table's position.
  auto table = [&](std::vector<uint16_t> fields, uint16_t table_bytes) {
    const size_t vtable = b.size();
    std::vector<uint16_t> v{static_cast<uint16_t>(4 + 2 * fields.size()), table_bytes};
    v.insert(v.end(), fields.begin(), fields.end());
    if (v.size() % 2 != 0) v.push_back(0);  // keeps the table 4-byte aligned
    b.append(reinterpret_cast<const char*>(v.data()), 2 * v.size());
    const size_t at = b.size();
    put32(static_cast<uint32_t>(at - vtable));
    b.append(table_bytes - 4, '\0');
    return at;
  };
  const size_t session = table({0, 4}, 8);
  patch(0, session);
  const size_t model = table({0, 0, 0, 0, 0, 0, 0, 4}, 8);
  patch(session + 4, model);
  const size_t graph = table({4}, 8);
  patch(model + 4, graph);
  const size_t initializers = b.size();
  patch(graph + 4, initializers);
  put32(1);
  put32(0);
  const size_t tensor = table({4, 0, 8, 12, 16}, 20);
  patch(initializers + 4, tensor);
  const uint32_t float32 = 1;
  std::memcpy(b.data() + tensor + 12, &float32, 4);
  patch(tensor + 4, b.size());
  put32(1);
  b += "w";
  b.append(3, '\0');  // the terminating NUL, then padding
  patch(tensor + 8, b.size());
  put32(2);
  for (const int64_t d : {int64_t{1}, int64_t{4}}) b.append(reinterpret_cast<const char*>(&d), 8);
  patch(tensor + 16, b.size());
  put32(16);
  b.append(16, '\1');
  return b;
}

std::string report_seed() {
  StartReport r;
  r.model = "m.onnx";
  r.strategy = "fleet";
  DeviceStatus d;
  d.device = Device::cpu(1);
  d.state = DeviceState::ready;
  d.provider = "cpu";
  d.pid = 42;
  r.devices.push_back(d);
  d.state = DeviceState::failed;
  d.error = "cuda:1 did not become ready within 7200 s";
  r.devices.push_back(d);
  r.spawn_ns = 10;
  r.main_ns = 20;
  r.ready_ns = 30;
  r.all_ready = false;
  r.timeline = Timeline(0);
  r.timeline.add({"session_create", "cpu:1", 5, 25, 1000, {}});
  return r.to_json();
}

std::string config_seed() {
  RunConfig c;
  c.name = "fuzz";
  c.session.intra_op_threads = 2;
  c.session.optimized_model_cache = true;
  c.session.config_entries["session.x"] = "1";
  c.cuda.gpu_mem_limit = 1 << 30;
  c.cuda.extra["k"] = "v";
  c.shapes.batches = {1, 8};
  c.shapes.declared = {{{"input", {1, 3, 224, 224}}}};
  return c.to_json();
}

std::string plan_seed() {
  detail::LocalStartPlan plan;
  plan.model_path = "m.onnx";
  plan.devices = {Device::cpu(), Device::cuda(1)};
  plan.warmup_runs = 2;
  return detail::plan_to_json(plan).dump();
}

std::string tensors_seed() {
  std::shared_ptr<detail::SharedBuffer> buffer;
  const float values[4] = {1, 2, 3, 4};
  const int64_t ids[2] = {7, 8};
  return detail::pack_tensors({Tensor::host_copy("x", ElementType::float32, {1, 4}, values),
                               Tensor::host_copy("ids", ElementType::int64, {2}, ids)},
                              buffer)
      .dump();
}

/// What a pool server does with a client's message: read it (never throws), then read the request it
/// names field by field. Anything but an ortfleet::Error escaping here would end the server's thread.
void pool_request(std::string_view bytes) {
  detail::Received received = detail::read_message(bytes.data(), bytes.size());
  if (received.kind != detail::Received::Kind::message) return;  // refused as malformed
  const std::string op = detail::op_of(received.message.body);
  if (detail::is_request(op, detail::pool_message::open)) detail::read_open_request(received.message.body);
  if (detail::is_request(op, detail::pool_message::hand_over)) detail::read_hand_over_request(received.message.body);
  if (detail::is_request(op, detail::pool_message::worker_killed)) detail::read_worker_killed_note(received.message.body);
  if (detail::is_request(op, detail::pool_message::restore_ahead)) detail::read_restore_ahead_request(received.message.body);
}

std::vector<std::string> pool_request_seeds() {
  return {detail::request_of(detail::pool_message::open, {{"plan", json::parse(plan_seed())}, {"timeout_s", 60}}).dump(),
          detail::request_of(detail::pool_message::hand_over, {{"pid", 4242}, {"device", "cuda:1"}, {"visible_devices", "1"}, {"model", "/m.onnx"}}).dump(),
          detail::request_of(detail::pool_message::worker_killed, {{"pid", 4242}, {"what", "run"}}).dump(),
          detail::request_of(detail::pool_message::restore_ahead, {{"devices", {"cuda:0", "cuda:3"}}, {"model", "/m.onnx"}}).dump(),
          detail::request_of(detail::pool_message::status).dump(), "hello", "[1,2]", R"({"op":5})"};
}

const std::vector<Target> kTargets = {
    {"pool_request", pool_request, pool_request_seeds},
    {"config", [](std::string_view b) { RunConfig::from_json(std::string(b), "fuzz.json"); },
     [] { return std::vector<std::string>{config_seed(), RunConfig{}.to_json()}; }},
    {"plan", [](std::string_view b) { with_json(b, [](const json& j) { detail::plan_from_json(j); }); },
     [] { return std::vector<std::string>{plan_seed()}; }},
    {"status", [](std::string_view b) { with_json(b, [](const json& j) { detail::status_from_json(j); }); },
     [] {
       DeviceStatus d;
       d.device = Device::cuda(3);
       d.state = DeviceState::ready;
       d.memory_bytes = 1 << 20;
       return std::vector<std::string>{detail::status_to_json(d).dump()};
     }},
    {"error", [](std::string_view b) { with_json(b, [](const json& j) { detail::error_from_json(j, "cpu"); }); },
     [] { return std::vector<std::string>{detail::error_to_json(Error("x failed", "do y", "cuda:0")).dump()}; }},
    {"specs", [](std::string_view b) { with_json(b, [](const json& j) { detail::specs_from_json(j); }); },
     [] {
       return std::vector<std::string>{
           detail::specs_to_json({{"input", ElementType::float32, {-1, 3, 224, 224}, {"batch", "", "", ""}}}).dump()};
     }},
    {"tensors",
     [](std::string_view b) {
       with_json(b, [](const json& j) {
         // Read every byte the descriptions claim: a description outside the buffer must be refused.
         volatile unsigned char sum = 0;
         for (const auto& t : detail::unpack_tensors(j, tensor_buffer())) {
           for (size_t i = 0; i < t.bytes; ++i) sum = static_cast<unsigned char>(sum + static_cast<const unsigned char*>(t.data)[i]);
         }
       });
     },
     [] { return std::vector<std::string>{tensors_seed()}; }},
    {"start_report", [](std::string_view b) { StartReport::from_json(std::string(b)); },
     [] { return std::vector<std::string>{report_seed()}; }},
    {"timeline", [](std::string_view b) { Timeline::from_json(std::string(b)); },
     [] {
       Timeline t(100);
       t.add({"ort_load", "process", 110, 150, 0, {}});
       t.add({"warmup", "cuda:0", 150, 190, 0, {}});
       return std::vector<std::string>{t.to_json()};
     }},
    {"ort_profile", [](std::string_view b) { parse_ort_profile(std::string(b), "profile.json"); },
     [] {
       return std::vector<std::string>{
           R"([{"cat":"Session","name":"model_loading_uri","ts":1,"dur":100,"ph":"X","args":{}},)"
           R"({"cat":"Node","name":"conv1_kernel_time","ts":150,"dur":40,"ph":"X","args":{"op_name":"Conv","provider":"CUDAExecutionProvider"}}])"};
     }},
    {"ort_log", [](std::string_view b) { parse_ort_log(std::string(b), "ort.log"); },
     [] {
       return std::vector<std::string>{R"({"t":5,"severity":1,"message":"hi"})"
                                       "\n"
                                       R"({"t":6,"severity":3,"message":"Graph optimization took 12 ms"})"
                                       "\n"};
     }},
    {"ort_error_text", [](std::string_view b) { detail::describe_ort_failure(b); },
     [] {
       return std::vector<std::string>{
           "[ONNXRuntimeError] : 1 : FAIL : Load model from x.onnx failed:/onnxruntime/core/graph/model.cc:180 "
           "onnxruntime::Model::Model(onnx::ModelProto&&, const Logger&) Unsupported model IR version: 99, max supported IR version: 13",
           "/src/cuda_call.cc:129 std::conditional_t<THRW, void, Status> onnxruntime::CudaCall(ERRTYPE, int) [with ERRTYPE = "
           "cudaError; bool THRW = true] CUDA failure 2: out of memory ; GPU=0 ; hostname=h ; file=/a.cc ; line=53 ; expr=x; ",
           "Load model from m.onnx failed:This is an invalid model. In Node, (\"n\", Relu, \"\", -1) : (\"x\": tensor(float),) "
           "-> (\"y\": tensor(float),) , Error No Op registered for Relu with domain_version of 0",
           "x.h:46 void f::g(int) ONNX Runtime only *guarantees* support. Opset 99 is under development. Current official "
           "support for domain ai.onnx is till opset 26.",
           "External data path validation failed for initializer: w. Error: tensorprotoutils.cc:426 "
           "ValidateExternalDataPathFromDir Absolute path not allowed for external data location"};
     }},
    {"ort_format",
     [](std::string_view b) {
       const fs::path path = model_path().string() + ".ort";
       {
         std::ofstream out(path, std::ios::binary | std::ios::trunc);
         out.write(b.data(), static_cast<std::streamsize>(b.size()));
       }
       const detail::MappedFile file(path.string());
       for (const auto& init : detail::ort_format_initializers(file)) {
         if (init.offset + init.bytes > b.size()) throw std::logic_error("an initializer past the end of the file");
       }
       std::filesystem::remove(path);
     },
     [] { return std::vector<std::string>{ort_format_seed()}; }},
    {"model",
     [](std::string_view b) {
       {
         std::ofstream out(model_path(), std::ios::binary | std::ios::trunc);
         out.write(b.data(), static_cast<std::streamsize>(b.size()));
       }
       validate_model_file(model_path().string());
       inspect_model(model_path().string());
     },
     [] { return std::vector<std::string>{small_model(false), small_model(true)}; }},
};

}  // namespace

const std::vector<Target>& targets() { return kTargets; }

const Target& target(std::string_view name) {
  for (const auto& t : kTargets) {
    if (name == t.name) return t;
  }
  throw std::invalid_argument("no fuzz target named " + std::string(name));
}

void run_one(const Target& t, std::string_view bytes) {
  try {
    t.parse(bytes);
  } catch (const Error&) {
    // refused with an ortfleet::Error: what the parsers promise
  }
}

}  // namespace ortfleet::fuzz
