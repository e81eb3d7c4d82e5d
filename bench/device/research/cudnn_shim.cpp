// Research probe (issue 43), preloaded into a process that runs ONNX Runtime's CUDA EP
// (LD_PRELOAD=cudnn_shim.so): times every cuDNN backend API call by function and descriptor type, in
// phases the process marks (cudnn_shim_phase("first_run")), and records the execution plans that run
// (their JSON: engine and knobs). Writes a JSON report to $CUDNN_SHIM_OUT at exit. Nothing of
// cuDNN's headers is needed: types are plain integers, the JSON attribute's numbers come from the
// environment (CUDNN_SHIM_JSON_ATTR, CUDNN_SHIM_CHAR_TYPE), read from the header by the driver.
#include <dlfcn.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

using Status = int;
using Desc = void*;

namespace {
int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}
struct Cell {
  int64_t calls = 0, ns = 0, max_ns = 0, failed = 0;
};
struct State {
  std::mutex mu;
  std::string phase = "load";
  std::unordered_map<Desc, int> type_of;
  std::map<std::string, Cell> cells;  // phase|function|type(|attribute)
  std::map<std::string, int64_t> executed;  // plan JSON -> runs
  std::set<Desc> executed_plans;
  int64_t phase_start_ns = now_ns();
  std::map<std::string, int64_t> phase_ns;
};
State& state() {
  static State* s = new State();  // never destroyed: calls may come during exit
  return *s;
}
using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym() {
  static DlsymFn f = [] {
    void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (p == nullptr) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return reinterpret_cast<DlsymFn>(p);
  }();
  return f;
}
// The real functions: set when the CUDA EP looks them up with dlsym (it dlopens cuDNN), or found
// after the shim when it links them directly.
std::mutex real_mu;
std::map<std::string, void*>& reals() {
  static auto* m = new std::map<std::string, void*>();
  return *m;
}
template <class F>
F real(const char* name) {
  {
    std::lock_guard lock(real_mu);
    auto it = reals().find(name);
    if (it != reals().end()) return reinterpret_cast<F>(it->second);
  }
  void* p = real_dlsym()(RTLD_NEXT, name);
  if (p == nullptr) {
    std::fprintf(stderr, "cudnn_shim: %s not found after the shim\n", name);
    std::abort();
  }
  return reinterpret_cast<F>(p);
}
void add(const std::string& key, int64_t ns, bool ok) {
  auto& s = state();
  std::lock_guard lock(s.mu);
  Cell& c = s.cells[s.phase + "|" + key];
  ++c.calls;
  c.ns += ns;
  if (ns > c.max_ns) c.max_ns = ns;
  if (!ok) ++c.failed;
}
int type_of(Desc d) {
  auto& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.type_of.find(d);
  return it == s.type_of.end() ? -1 : it->second;
}
void write_report();
struct AtExit {
  ~AtExit() { write_report(); }
} at_exit;
}  // namespace

extern "C" {
Status cudnnBackendCreateDescriptor(int, Desc*);
Status cudnnBackendDestroyDescriptor(Desc);
Status cudnnBackendFinalize(Desc);
Status cudnnBackendSetAttribute(Desc, int, int, int64_t, const void*);
Status cudnnBackendGetAttribute(Desc, int, int, int64_t, int64_t*, void*);
Status cudnnBackendExecute(void*, Desc, Desc);
Status cudnnCreate(void**);

/// dlsym, seen first: a cuDNN function the shim times is handed out as the shim's own.
void* dlsym(void* handle, const char* name) {
  void* found = real_dlsym()(handle, name);
  if (found == nullptr || std::strncmp(name, "cudnn", 5) != 0) return found;
  static const std::map<std::string, void*> mine = {
      {"cudnnBackendCreateDescriptor", reinterpret_cast<void*>(&cudnnBackendCreateDescriptor)},
      {"cudnnBackendDestroyDescriptor", reinterpret_cast<void*>(&cudnnBackendDestroyDescriptor)},
      {"cudnnBackendFinalize", reinterpret_cast<void*>(&cudnnBackendFinalize)},
      {"cudnnBackendSetAttribute", reinterpret_cast<void*>(&cudnnBackendSetAttribute)},
      {"cudnnBackendGetAttribute", reinterpret_cast<void*>(&cudnnBackendGetAttribute)},
      {"cudnnBackendExecute", reinterpret_cast<void*>(&cudnnBackendExecute)},
      {"cudnnCreate", reinterpret_cast<void*>(&cudnnCreate)}};
  const auto it = mine.find(name);
  if (it != mine.end() && found == it->second) return found;  // the shim's own (RTLD_DEFAULT): the real one comes after it
  {
    std::lock_guard lock(real_mu);
    reals()[name] = found;
  }
  add(std::string("dlsym|") + name, 0, true);
  return it == mine.end() ? found : it->second;
}

void cudnn_shim_phase(const char* name) {
  auto& s = state();
  std::lock_guard lock(s.mu);
  const int64_t t = now_ns();
  s.phase_ns[s.phase] += t - s.phase_start_ns;
  s.phase_start_ns = t;
  s.phase = name;
}

Status cudnnBackendCreateDescriptor(int type, Desc* d) {
  auto f = real<Status (*)(int, Desc*)>("cudnnBackendCreateDescriptor");
  const int64_t t = now_ns();
  const Status r = f(type, d);
  const int64_t ns = now_ns() - t;
  if (r == 0) {
    std::lock_guard lock(state().mu);
    state().type_of[*d] = type;
  }
  add("create|" + std::to_string(type), ns, r == 0);
  return r;
}

Status cudnnBackendDestroyDescriptor(Desc d) {
  auto f = real<Status (*)(Desc)>("cudnnBackendDestroyDescriptor");
  const int type = type_of(d);
  const int64_t t = now_ns();
  const Status r = f(d);
  add("destroy|" + std::to_string(type), now_ns() - t, r == 0);
  std::lock_guard lock(state().mu);
  state().type_of.erase(d);
  return r;
}

Status cudnnBackendFinalize(Desc d) {
  auto f = real<Status (*)(Desc)>("cudnnBackendFinalize");
  const int type = type_of(d);
  const int64_t t = now_ns();
  const Status r = f(d);
  add("finalize|" + std::to_string(type), now_ns() - t, r == 0);
  return r;
}

Status cudnnBackendSetAttribute(Desc d, int name, int type, int64_t count, const void* values) {
  auto f = real<Status (*)(Desc, int, int, int64_t, const void*)>("cudnnBackendSetAttribute");
  const int dtype = type_of(d);
  const int64_t t = now_ns();
  const Status r = f(d, name, type, count, values);
  add("set|" + std::to_string(dtype) + "|" + std::to_string(name), now_ns() - t, r == 0);
  return r;
}

Status cudnnBackendGetAttribute(Desc d, int name, int type, int64_t requested, int64_t* count, void* values) {
  auto f = real<Status (*)(Desc, int, int, int64_t, int64_t*, void*)>("cudnnBackendGetAttribute");
  const int dtype = type_of(d);
  const int64_t t = now_ns();
  const Status r = f(d, name, type, requested, count, values);
  add("get|" + std::to_string(dtype) + "|" + std::to_string(name), now_ns() - t, r == 0);
  return r;
}

Status cudnnBackendExecute(void* handle, Desc plan, Desc varpack) {
  auto f = real<Status (*)(void*, Desc, Desc)>("cudnnBackendExecute");
  auto get = real<Status (*)(Desc, int, int, int64_t, int64_t*, void*)>("cudnnBackendGetAttribute");
  bool first = false;
  {
    std::lock_guard lock(state().mu);
    first = state().executed_plans.insert(plan).second;
  }
  if (first) {
    // The plan's JSON names its engine and knobs: what a record would keep.
    const char* attr = std::getenv("CUDNN_SHIM_JSON_ATTR");
    const char* chr = std::getenv("CUDNN_SHIM_CHAR_TYPE");
    std::string json = "?";
    if (attr != nullptr && chr != nullptr) {
      int64_t n = 0;
      static char buf[1 << 16];
      if (get(plan, std::atoi(attr), std::atoi(chr), sizeof(buf) - 1, &n, buf) == 0 && n > 0) json.assign(buf, std::strlen(buf));
    }
    std::lock_guard lock(state().mu);
    state().executed[json] += 1;
  }
  const int64_t t = now_ns();
  const Status r = f(handle, plan, varpack);
  add("execute", now_ns() - t, r == 0);
  return r;
}

Status cudnnCreate(void** handle) {
  auto f = real<Status (*)(void**)>("cudnnCreate");
  const int64_t t = now_ns();
  const Status r = f(handle);
  add("cudnnCreate", now_ns() - t, r == 0);
  return r;
}

void cudnn_shim_write() { write_report(); }

}  // extern "C"

namespace {
std::string escaped(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') o += "\\n";
    else if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}
void write_report() {
  const char* path = std::getenv("CUDNN_SHIM_OUT");
  if (path == nullptr) return;
  auto& s = state();
  std::lock_guard lock(s.mu);
  s.phase_ns[s.phase] += now_ns() - s.phase_start_ns;
  s.phase_start_ns = now_ns();
  FILE* out = std::fopen(path, "w");
  if (out == nullptr) return;
  std::fprintf(out, "{\"phases\": {");
  bool first = true;
  for (auto& [p, ns] : s.phase_ns) {
    std::fprintf(out, "%s\"%s\": %lld", first ? "" : ", ", p.c_str(), static_cast<long long>(ns));
    first = false;
  }
  std::fprintf(out, "},\n\"cells\": [");
  first = true;
  for (auto& [k, c] : s.cells) {
    std::fprintf(out, "%s\n[\"%s\", %lld, %lld, %lld, %lld]", first ? "" : ",", k.c_str(), static_cast<long long>(c.calls),
                 static_cast<long long>(c.ns), static_cast<long long>(c.max_ns), static_cast<long long>(c.failed));
    first = false;
  }
  std::fprintf(out, "],\n\"executed\": [");
  first = true;
  for (auto& [j, n] : s.executed) {
    std::fprintf(out, "%s\n[\"%s\", %lld]", first ? "" : ",", escaped(j).c_str(), static_cast<long long>(n));
    first = false;
  }
  std::fprintf(out, "]}\n");
  std::fclose(out);
}
}  // namespace
