// A shared library whole on disk (the loader's check passes it) whose initialiser crashes as it is
// loaded: as ONNX Runtime (OrtGetApiBase) or as a custom-op library (RegisterCustomOps). The crash
// line must name the library, never a model or its node (issue 58).
#include <csignal>

extern "C" {
__attribute__((visibility("default"))) const void* OrtGetApiBase() { return nullptr; }
__attribute__((visibility("default"))) void* RegisterCustomOps(void*, const void*) { return nullptr; }
}

namespace {
__attribute__((constructor)) void crash_as_loaded() { std::raise(SIGSEGV); }
}  // namespace
