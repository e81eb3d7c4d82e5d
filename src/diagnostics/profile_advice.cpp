// The advice table of profile: for each phase of a start, its label and what to do when it is among
// the largest costs.
#include "diagnostics/profile_advice.hpp"

#include <string>

namespace ortfleet::detail {

namespace {

constexpr Advice kAdvice[] = {
    {"process.start", "process start (exec to main)", "dynamic loading of the executable; rarely worth attention"},
    {"tool.setup", "ortfleet set-up (arguments, device list)", "fixed cost of the command line"},
    {"runtime.load", "ONNX Runtime library load", "a fleet loads it beside CUDA initialisation, once per process"},
    {"ep.register", "CUDA EP library load, registration and cuInit",
     "the 230 MB CUDA EP library and cuInit: a fleet loads the library, runs cuInit and reads the model in parallel"},
    {"cuda.context", "CUDA context creation",
     "about 0.1 s per GPU and serialised by the driver across GPUs: keep one long-lived process per GPU "
     "(ortfleet's worker processes) and GPU persistence mode on"},
    {"model.load", "model read and parse",
     "protobuf parsing copies every weight: keep large weights as external data, or use the optimised-model cache "
     "(--model-cache), which stores them that way"},
    {"session.setup", "execution provider and allocator set-up", "creating the EP instance, its streams and handles"},
    {"graph.optimization", "graph optimisation",
     "pay it once: the optimised-model cache (--model-cache) loads a pre-optimised copy; or lower --graph-opt "
     "('ortfleet tune' measures the speed it costs)"},
    {"partitioning", "partitioning, placement and session state",
     "grows with the node count; the optimised-model cache removes the work of fusing nodes first"},
    {"initializer.upload", "initializer upload", "copying weights into device memory; external data (mmap) avoids a host copy"},
    {"weights.upload", "weights upload (ortfleet, staged)",
     "the cached graph's weights in a few large copies from pinned memory, before the session exists"},
    {"kernel.creation", "kernel creation and memory planning", "one-time per session; shrinks with fewer nodes"},
    {"session.other", "rest of session creation", "session creation outside the steps ONNX Runtime logs"},
    {"warmup", "first inference (warm-up)",
     "every new ONNX Runtime session pays it, in any process: cuDNN's plans for each convolution shape (built, kernels "
     "loaded or compiled) and, with EXHAUSTIVE, its algorithm search live in the session; HEURISTIC or DEFAULT (--conv-algo) "
     "cut the search, not the plans ('ortfleet tune' shows what each costs in latency); a session a warm pool keeps "
     "resident (the one a start leaves behind, or ortfleet serve) skips all of it"},
};

}  // namespace

const Advice& advice_for(const std::string& name) {
  for (const auto& a : kAdvice) {
    if (name == a.name) return a;
  }
  static const Advice unknown{"", "", ""};
  return unknown;
}

}  // namespace ortfleet::detail
