// cuDNN 9's libcudnn.so.9 as GPU machines have it, for the tests of libortfleet_cudnn.so: not the backend
// itself but a dispatcher that, on every call, looks the same name up with dlsym in its sub-library
// (libcudnn_graph.so.9: here the stand-in of fake_cudnn.cpp) and calls what it was given. Preloaded,
// libortfleet_cudnn.so answers that dlsym with its own functions; it must then go on to the sub-library's,
// never back into this one, or every call recurses until the stack runs out (the crash 4xH200-final found).
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {
template <class F>
F in_sub_library(const char* name) {
  static void* const sub = dlopen("libcudnn_graph.so.9", RTLD_NOW | RTLD_LOCAL);
  void* f = sub != nullptr ? dlsym(sub, name) : nullptr;
  if (f == nullptr) {
    std::fprintf(stderr, "fake libcudnn.so.9: no %s in libcudnn_graph.so.9: %s\n", name, dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(f);
}
}  // namespace

extern "C" {
size_t cudnnGetVersion() { return in_sub_library<size_t (*)()>("cudnnGetVersion")(); }
int cudnnBackendCreateDescriptor(int type, void** d) { return in_sub_library<int (*)(int, void**)>("cudnnBackendCreateDescriptor")(type, d); }
int cudnnBackendDestroyDescriptor(void* d) { return in_sub_library<int (*)(void*)>("cudnnBackendDestroyDescriptor")(d); }
int cudnnBackendSetAttribute(void* d, int name, int type, int64_t count, const void* values) {
  return in_sub_library<int (*)(void*, int, int, int64_t, const void*)>("cudnnBackendSetAttribute")(d, name, type, count, values);
}
int cudnnBackendFinalize(void* d) { return in_sub_library<int (*)(void*)>("cudnnBackendFinalize")(d); }
int cudnnBackendGetAttribute(void* d, int name, int type, int64_t requested, int64_t* count, void* values) {
  return in_sub_library<int (*)(void*, int, int, int64_t, int64_t*, void*)>("cudnnBackendGetAttribute")(d, name, type, requested, count, values);
}
int cudnnBackendExecute(void* handle, void* plan, void* pack) {
  return in_sub_library<int (*)(void*, void*, void*)>("cudnnBackendExecute")(handle, plan, pack);
}
}  // extern "C"
