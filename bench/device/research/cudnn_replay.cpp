// Research prototype (issue 43), preloaded into a process that runs ONNX Runtime's CUDA EP
// (LD_PRELOAD=cudnn_replay.so; the EP dlopens cuDNN and looks its functions up with dlsym, which the
// shim answers with its own). Built on the GPU machine against cuDNN's own headers.
//   - times every cuDNN backend call by function and descriptor type, per phase the process marks
//     (cudnn_shim_phase), and writes a JSON report to $CUDNN_SHIM_OUT (cudnn_shim_write);
//   - records, per heuristics query (its operation graph's fingerprint and mode), the engine and knobs
//     of the plan that ran, into $CUDNN_SHIM_RECORD (one line each);
//   - with $CUDNN_SHIM_REPLAY, answers a heuristics query it has a record for with that one engine
//     configuration, built from the engine's global index and knobs, without running heuristics; any
//     failure falls back to cuDNN's own query.
#include <cudnn.h>
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

using Desc = cudnnBackendDescriptor_t;

namespace {
int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

struct Attr {
  int type = 0;
  std::string bytes;            // plain values
  std::vector<Desc> children;   // descriptor values
};
struct Choice {
  int64_t engine = -1;
  std::vector<std::pair<int, int64_t>> knobs;
  std::string text() const {
    std::ostringstream o;
    o << engine;
    for (auto& [t, v] : knobs) o << " " << t << "=" << v;
    return o.str();
  }
};
struct Info {
  int type = -1;
  std::map<int, Attr> sets;  // by attribute name: the last value set
  std::string fp;             // once finalized
  bool replayed = false;      // a heuristics query answered from a record
  std::string key;            // a heuristics query's key
};
struct Cell {
  int64_t calls = 0, ns = 0, max_ns = 0, failed = 0;
};
struct State {
  std::recursive_mutex mu;
  std::unordered_map<Desc, Info> descs;
  std::unordered_map<Desc, std::string> cfg_key;       // an engine config -> the query it answered
  std::unordered_map<Desc, Choice> cfg_choice;         // configs the shim built
  std::set<Desc> executed;
  std::map<std::string, Choice> replay, recorded;
  std::map<std::string, Cell> cells;
  std::map<std::string, int64_t> counters;
  std::string phase = "load";
  int64_t phase_start_ns = now_ns();
  std::map<std::string, int64_t> phase_ns;
  std::vector<Desc> kept;  // descriptors the shim made for replayed configs: alive for the process
};
State& st() {
  static State* s = new State();
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
    std::fprintf(stderr, "cudnn_replay: %s not found\n", name);
    std::abort();
  }
  return reinterpret_cast<F>(p);
}
#define REAL(name) real<decltype(&name)>(#name)

void add(const std::string& key, int64_t ns, bool ok) {
  auto& s = st();
  std::lock_guard lock(s.mu);
  Cell& c = s.cells[s.phase + "|" + key];
  ++c.calls;
  c.ns += ns;
  c.max_ns = std::max(c.max_ns, ns);
  if (!ok) ++c.failed;
}
void bump(const std::string& what) {
  std::lock_guard lock(st().mu);
  ++st().counters[what];
}

size_t element_size(cudnnBackendAttributeType_t t) {
  switch (t) {
    case CUDNN_TYPE_HANDLE: case CUDNN_TYPE_VOID_PTR: case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(void*);
    case CUDNN_TYPE_INT64: case CUDNN_TYPE_DOUBLE: return 8;
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_CHAR: return 1;
    case CUDNN_TYPE_FLOAT: return 4;
    case CUDNN_TYPE_FRACTION: return sizeof(cudnnFraction_t);
    default: return 4;  // the enum-valued types and INT32
  }
}

int type_of(Desc d) {
  std::lock_guard lock(st().mu);
  auto it = st().descs.find(d);
  return it == st().descs.end() ? -1 : it->second.type;
}

/// A descriptor's content, canonical: its type and every attribute set on it, child descriptors by
/// their own fingerprints; handles and pointers left out (they differ from process to process).
std::string fingerprint(Desc d, int depth = 0) {
  auto& s = st();
  std::lock_guard lock(s.mu);
  auto it = s.descs.find(d);
  if (it == s.descs.end() || depth > 32) return "?";
  Info& info = it->second;
  if (!info.fp.empty()) return info.fp;
  std::ostringstream o;
  o << "T" << info.type << "{";
  for (auto& [name, a] : info.sets) {
    if (a.type == CUDNN_TYPE_HANDLE || a.type == CUDNN_TYPE_VOID_PTR) continue;
    o << name << ":";
    if (a.type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
      o << "[";
      for (Desc c : a.children) o << fingerprint(c, depth + 1) << ",";
      o << "]";
    } else {
      static const char* hex = "0123456789abcdef";
      for (unsigned char c : a.bytes) o << hex[c >> 4] << hex[c & 15];
    }
    o << ";";
  }
  o << "}";
  std::string text = o.str();
  // The key stays short: a 64-bit FNV-1a of the text, with the type.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%d:%016llx", info.type, static_cast<unsigned long long>(h));
  return buf;
}

void load_replay() {
  const char* path = std::getenv("CUDNN_SHIM_REPLAY");
  if (path == nullptr) return;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string key;
    Choice c;
    f >> key >> c.engine;
    std::string kv;
    while (f >> kv) {
      const auto eq = kv.find('=');
      if (eq != std::string::npos) c.knobs.emplace_back(std::stoi(kv.substr(0, eq)), std::stoll(kv.substr(eq + 1)));
    }
    if (!key.empty() && c.engine >= 0) st().replay[key] = c;
  }
}
struct Init {
  Init() { load_replay(); }
} init;

/// The engine and knobs of an engine config cuDNN made (read back through GetAttribute).
bool read_choice(Desc cfg, Choice& out) {
  auto create = REAL(cudnnBackendCreateDescriptor);
  auto get = REAL(cudnnBackendGetAttribute);
  auto destroy = REAL(cudnnBackendDestroyDescriptor);
  Desc engine = nullptr;
  if (create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS) return false;
  int64_t n = 0;
  bool ok = get(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) == CUDNN_STATUS_SUCCESS &&
            get(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &out.engine) == CUDNN_STATUS_SUCCESS;
  destroy(engine);
  if (!ok) return false;
  std::vector<Desc> knobs(CUDNN_KNOB_TYPE_COUNTS, nullptr);
  for (auto& k : knobs) create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &k);
  int64_t got = 0;
  if (get(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(knobs.size()), &got, knobs.data()) ==
      CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < got; ++i) {
      cudnnBackendKnobType_t t{};
      int64_t v = 0;
      if (get(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &t) == CUDNN_STATUS_SUCCESS &&
          get(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &v) == CUDNN_STATUS_SUCCESS) {
        out.knobs.emplace_back(static_cast<int>(t), v);
      }
    }
  }
  for (auto& k : knobs) destroy(k);
  return true;
}

void keep(Desc d) {
  std::lock_guard lock(st().mu);
  st().kept.push_back(d);
}

/// Makes `cfg` (created by the caller) the engine configuration `c` for `graph`; false when cuDNN refuses.
bool build_choice(Desc cfg, Desc graph, const Choice& c) {
  auto create = REAL(cudnnBackendCreateDescriptor);
  auto set = REAL(cudnnBackendSetAttribute);
  auto finalize = REAL(cudnnBackendFinalize);
  Desc engine = nullptr;
  if (create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS) return false;
  keep(engine);
  int64_t index = c.engine;
  if (set(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph) != CUDNN_STATUS_SUCCESS ||
      set(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &index) != CUDNN_STATUS_SUCCESS || finalize(engine) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  std::vector<Desc> knobs;
  for (auto& [t, v] : c.knobs) {
    Desc k = nullptr;
    if (create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &k) != CUDNN_STATUS_SUCCESS) return false;
    keep(k);
    auto type = static_cast<cudnnBackendKnobType_t>(t);
    int64_t value = v;
    if (set(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type) != CUDNN_STATUS_SUCCESS ||
        set(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &value) != CUDNN_STATUS_SUCCESS || finalize(k) != CUDNN_STATUS_SUCCESS) {
      return false;
    }
    knobs.push_back(k);
  }
  if (set(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine) != CUDNN_STATUS_SUCCESS) return false;
  if (!knobs.empty() &&
      set(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(knobs.size()), knobs.data()) !=
          CUDNN_STATUS_SUCCESS) {
    return false;
  }
  return finalize(cfg) == CUDNN_STATUS_SUCCESS;
}

void write_report();
void write_records();
}  // namespace

extern "C" {
cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, Desc* d) {
  const int64_t t = now_ns();
  const cudnnStatus_t r = REAL(cudnnBackendCreateDescriptor)(type, d);
  if (r == CUDNN_STATUS_SUCCESS) {
    std::lock_guard lock(st().mu);
    Info& info = st().descs[*d];
    info = Info{};
    info.type = type;
  }
  add("create|" + std::to_string(type), now_ns() - t, r == CUDNN_STATUS_SUCCESS);
  return r;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(Desc d) {
  const int type = type_of(d);
  const int64_t t = now_ns();
  const cudnnStatus_t r = REAL(cudnnBackendDestroyDescriptor)(d);
  add("destroy|" + std::to_string(type), now_ns() - t, r == CUDNN_STATUS_SUCCESS);
  std::lock_guard lock(st().mu);
  st().descs.erase(d);
  st().cfg_key.erase(d);
  st().cfg_choice.erase(d);
  st().executed.erase(d);
  return r;
}

cudnnStatus_t cudnnBackendSetAttribute(Desc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n, const void* values) {
  const int dtype = type_of(d);
  const int64_t t = now_ns();
  const cudnnStatus_t r = REAL(cudnnBackendSetAttribute)(d, name, type, n, values);
  add("set|" + std::to_string(dtype) + "|" + std::to_string(name), now_ns() - t, r == CUDNN_STATUS_SUCCESS);
  if (r == CUDNN_STATUS_SUCCESS && values != nullptr && n >= 0 && n < (1 << 20)) {
    Attr a;
    a.type = type;
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
      const Desc* v = static_cast<const Desc*>(values);
      a.children.assign(v, v + n);
    } else {
      a.bytes.assign(static_cast<const char*>(values), element_size(type) * static_cast<size_t>(n));
    }
    std::lock_guard lock(st().mu);
    auto it = st().descs.find(d);
    if (it != st().descs.end()) {
      it->second.sets[name] = std::move(a);
      it->second.fp.clear();
    }
  }
  return r;
}

cudnnStatus_t cudnnBackendFinalize(Desc d) {
  const int type = type_of(d);
  if (type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR) {
    const std::string key = fingerprint(d);
    std::lock_guard lock(st().mu);
    Info& info = st().descs[d];
    info.key = key;
    if (st().replay.count(key)) {
      info.replayed = true;  // no heuristics: the results are answered from the record
      ++st().counters["heuristics replayed"];
      add("finalize|" + std::to_string(type) + "|replayed", 0, true);
      return CUDNN_STATUS_SUCCESS;
    }
    ++st().counters["heuristics run"];
  }
  const int64_t t = now_ns();
  const cudnnStatus_t r = REAL(cudnnBackendFinalize)(d);
  add("finalize|" + std::to_string(type), now_ns() - t, r == CUDNN_STATUS_SUCCESS);
  if (r == CUDNN_STATUS_SUCCESS && type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR) fingerprint(d);
  return r;
}

cudnnStatus_t cudnnBackendGetAttribute(Desc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t* count, void* values) {
  const int dtype = type_of(d);
  if (dtype == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && name == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
    Choice choice;
    Desc graph = nullptr;
    std::string key;
    bool replayed = false;
    {
      std::lock_guard lock(st().mu);
      Info& info = st().descs[d];
      replayed = info.replayed;
      key = info.key;
      if (replayed) {
        choice = st().replay[key];
        auto g = info.sets.find(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
        if (g != info.sets.end() && !g->second.children.empty()) graph = g->second.children[0];
      }
    }
    if (replayed) {
      if (requested == 0 || values == nullptr) {
        if (count) *count = 1;
        return CUDNN_STATUS_SUCCESS;
      }
      const int64_t t = now_ns();
      Desc cfg = static_cast<Desc*>(values)[0];
      if (graph != nullptr && build_choice(cfg, graph, choice)) {
        add("replay_build_cfg", now_ns() - t, true);
        if (count) *count = 1;
        std::lock_guard lock(st().mu);
        st().cfg_key[cfg] = key;
        st().cfg_choice[cfg] = choice;
        return CUDNN_STATUS_SUCCESS;
      }
      // cuDNN refused the recorded choice: its own query after all.
      bump("replay refused: heuristics run after all");
      {
        std::lock_guard lock(st().mu);
        st().descs[d].replayed = false;
      }
      const cudnnStatus_t f = REAL(cudnnBackendFinalize)(d);
      if (f != CUDNN_STATUS_SUCCESS) return f;
    }
    const int64_t t = now_ns();
    const cudnnStatus_t r = REAL(cudnnBackendGetAttribute)(d, name, type, requested, count, values);
    add("get|" + std::to_string(dtype) + "|" + std::to_string(name), now_ns() - t, r == CUDNN_STATUS_SUCCESS);
    if (r == CUDNN_STATUS_SUCCESS && values != nullptr && count != nullptr) {
      std::lock_guard lock(st().mu);
      for (int64_t i = 0; i < *count && i < requested; ++i) st().cfg_key[static_cast<Desc*>(values)[i]] = key;
    }
    return r;
  }
  const int64_t t = now_ns();
  const cudnnStatus_t r = REAL(cudnnBackendGetAttribute)(d, name, type, requested, count, values);
  add("get|" + std::to_string(dtype) + "|" + std::to_string(name), now_ns() - t, r == CUDNN_STATUS_SUCCESS);
  return r;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, Desc plan, Desc pack) {
  bool first = false;
  Desc cfg = nullptr;
  std::string key;
  Choice known;
  bool have = false;
  {
    std::lock_guard lock(st().mu);
    first = st().executed.insert(plan).second;
    if (first) {
      auto& info = st().descs[plan];
      auto c = info.sets.find(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
      if (c != info.sets.end() && !c->second.children.empty()) cfg = c->second.children[0];
      if (cfg) {
        auto k = st().cfg_key.find(cfg);
        if (k != st().cfg_key.end()) key = k->second;
        auto ch = st().cfg_choice.find(cfg);
        if (ch != st().cfg_choice.end()) {
          known = ch->second;
          have = true;
        }
      }
    }
  }
  if (first) {
    if (key.empty()) {
      bump("plans run from a query the shim did not see");
    } else {
      if (!have) have = read_choice(cfg, known);
      std::lock_guard lock(st().mu);
      if (have) st().recorded[key] = known;
      else ++st().counters["plans whose choice could not be read"];
    }
  }
  const int64_t t = now_ns();
  const cudnnStatus_t r = REAL(cudnnBackendExecute)(handle, plan, pack);
  add("execute", now_ns() - t, r == CUDNN_STATUS_SUCCESS);
  return r;
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  const int64_t t = now_ns();
  const cudnnStatus_t r = REAL(cudnnCreate)(handle);
  add("cudnnCreate", now_ns() - t, r == CUDNN_STATUS_SUCCESS);
  return r;
}

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
  if (it != mine.end() && found == it->second) return found;
  {
    std::lock_guard lock(real_mu);
    reals()[name] = found;
  }
  bump(std::string("dlsym ") + name);
  return it == mine.end() ? found : it->second;
}

void cudnn_shim_phase(const char* name) {
  auto& s = st();
  std::lock_guard lock(s.mu);
  const int64_t t = now_ns();
  s.phase_ns[s.phase] += t - s.phase_start_ns;
  s.phase_start_ns = t;
  s.phase = name;
}

void cudnn_shim_write() {
  write_report();
  write_records();
}
}  // extern "C"

namespace {
void write_records() {
  const char* path = std::getenv("CUDNN_SHIM_RECORD");
  if (path == nullptr) return;
  std::lock_guard lock(st().mu);
  std::ofstream out(path);
  for (auto& [k, c] : st().recorded) out << k << " " << c.text() << "\n";
}
void write_report() {
  const char* path = std::getenv("CUDNN_SHIM_OUT");
  if (path == nullptr) return;
  auto& s = st();
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
  std::fprintf(out, "},\n\"counters\": {");
  first = true;
  for (auto& [k, n] : s.counters) {
    std::fprintf(out, "%s\"%s\": %lld", first ? "" : ", ", k.c_str(), static_cast<long long>(n));
    first = false;
  }
  std::fprintf(out, "},\n\"recorded\": %zu, \"replay_loaded\": %zu,\n\"cells\": [", s.recorded.size(), s.replay.size());
  first = true;
  for (auto& [k, c] : s.cells) {
    std::fprintf(out, "%s\n[\"%s\", %lld, %lld, %lld, %lld]", first ? "" : ",", k.c_str(), static_cast<long long>(c.calls),
                 static_cast<long long>(c.ns), static_cast<long long>(c.max_ns), static_cast<long long>(c.failed));
    first = false;
  }
  std::fprintf(out, "]}\n");
  std::fclose(out);
}
}  // namespace
