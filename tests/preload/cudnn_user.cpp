// Uses cuDNN's backend API as ONNX Runtime's CUDA EP does for a convolution, to test libortfleet_cudnn.so
// against the stand-in cuDNN (fake_cudnn.cpp): dlopen("libcudnn.so.9"), each call looked up with dlsym, an
// operation graph, a heuristics query (how many configurations, then the configurations), the first plan
// that builds, one run. Prints the preloaded library's report, when it is there.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  void* cudnn = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  if (cudnn == nullptr) {
    std::fprintf(stderr, "no libcudnn.so.9: %s\n", dlerror());
    return 2;
  }
  using Create = int (*)(int, void**);
  using Set = int (*)(void*, int, int, int64_t, const void*);
  using Get = int (*)(void*, int, int, int64_t, int64_t*, void*);
  using Finalize = int (*)(void*);
  using Execute = int (*)(void*, void*, void*);
  auto create = reinterpret_cast<Create>(dlsym(cudnn, "cudnnBackendCreateDescriptor"));
  auto set = reinterpret_cast<Set>(dlsym(cudnn, "cudnnBackendSetAttribute"));
  auto get = reinterpret_cast<Get>(dlsym(cudnn, "cudnnBackendGetAttribute"));
  auto finalize = reinterpret_cast<Finalize>(dlsym(cudnn, "cudnnBackendFinalize"));
  auto execute = reinterpret_cast<Execute>(dlsym(cudnn, "cudnnBackendExecute"));
  void* tensor = nullptr;
  void* graph = nullptr;
  void* heuristics = nullptr;
  const int64_t dims[4] = {1, 3, 224, 224};
  const int mode = 1;  // heuristics mode B (EXHAUSTIVE's)
  create(17, &tensor);
  set(tensor, 902, 3, 4, dims);
  finalize(tensor);
  create(15, &graph);
  set(graph, 801, 15, 1, &tensor);
  finalize(graph);
  create(4, &heuristics);
  set(heuristics, 201, 15, 1, &graph);
  set(heuristics, 200, 8, 1, &mode);
  if (finalize(heuristics) != 0) return 3;
  int64_t count = 0;
  if (get(heuristics, 202, 15, 0, &count, nullptr) != 0 || count < 1) return 4;
  std::vector<void*> configs(static_cast<size_t>(count));
  for (auto& c : configs) create(3, &c);
  if (get(heuristics, 202, 15, count, &count, configs.data()) != 0) return 5;
  void* plan = nullptr;
  create(5, &plan);
  bool built = false;
  for (int64_t i = 0; i < count && !built; ++i) {
    set(plan, 401, 15, 1, &configs[static_cast<size_t>(i)]);
    built = finalize(plan) == 0;
  }
  if (!built || execute(nullptr, plan, nullptr) != 0) return 6;
  using Report = int (*)(char*, int);
  if (auto report = reinterpret_cast<Report>(dlsym(RTLD_DEFAULT, "ortfleet_cudnn_report"))) {
    char text[1024];
    report(text, sizeof text);
    std::printf("%s\n", text);
  }
  return 0;
}
