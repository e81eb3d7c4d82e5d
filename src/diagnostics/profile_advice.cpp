// The advice table of profile: for each phase of a start, its label and what to do when it is among
// the largest costs.
#include "diagnostics/profile_advice.hpp"

#include <string>

namespace ortfleet::detail {

namespace {

// Labels short enough that profile's table keeps a row on one line.
constexpr Advice kAdvice[] = {
    {"process.start", "process start (exec to main)", "dynamic loading of the executable; rarely worth attention", false},
    {"tool.setup", "ortfleet set-up (arguments, config)", "the command's own set-up before the first phase", false},
    {"runtime.load", "ONNX Runtime library load",
     "every new process loads it; a warm pool's workers (the pool a start leaves behind, or ortfleet serve) keep it loaded"},
    {"ep.library.load", "CUDA EP library load", "the 230 MB CUDA EP library, loaded once per process: a warm pool's workers keep it loaded"},
    {"ep.register", "CUDA EP registration (and cuInit)",
     "the CUDA EP's registration and, in a sequential start, cuInit: a fleet runs cuInit beside the runtime's load; a warm pool skips both"},
    {"cuda.init", "cuInit", "the driver's start, once per process: a warm pool's workers keep their context, and GPU persistence mode keeps the driver loaded"},
    {"cuda.context", "CUDA context creation",
     "about 0.1 s per GPU and serialised by the driver across GPUs: keep one long-lived process per GPU "
     "(ortfleet's worker processes) and GPU persistence mode on"},
    {"model.read", "model read", "the model's bytes into memory: the page cache keeps them for the next start; external data is mapped, not copied"},
    {"session.create", "session creation",
     "ONNX Runtime's work on the graph: the optimised-model cache (--model-cache) skips most of it"},
    {"model.load", "model read and parse",
     "protobuf parsing copies every weight: keep large weights as external data, or use the optimised-model cache "
     "(--model-cache), which stores them that way"},
    {"session.setup", "EP and allocator set-up", "creating the EP instance, its streams and handles", false},
    {"graph.optimization", "graph optimisation",
     "pay it once: the optimised-model cache (--model-cache) loads a pre-optimised copy; or lower --graph-opt "
     "('ortfleet tune' measures the speed it costs)"},
    {"partitioning", "partitioning and session state",
     "grows with the node count; the optimised-model cache removes the work of fusing nodes first"},
    {"initializer.upload", "initializer upload", "copying weights into device memory; external data (mmap) avoids a host copy"},
    {"weights.upload", "weights upload (ortfleet)",
     "the cached graph's weights in a few large copies from pinned memory, before the session exists"},
    {"kernel.creation", "kernels and memory planning", "one-time per session; shrinks with fewer nodes"},
    {"session.other", "rest of session creation", "session creation outside the steps ONNX Runtime logs", false},
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
  static const Advice unknown{"", "", "", false};
  return unknown;
}

}  // namespace ortfleet::detail
