// libortfleet_cudnn.so: preloaded into ortfleet's GPU worker processes (LD_PRELOAD) to keep cuDNN's choices
// across processes, and to time cuDNN's work by kind. See README.md beside it.
//
// ONNX Runtime's CUDA EP (1.2x, cuDNN 9) opens cuDNN with dlopen and resolves its functions with dlsym;
// this library defines dlsym, and hands out its own versions of the backend API's calls. Each passes the
// call on to cuDNN. Along the way it remembers what was set on every descriptor, so that an operation
// graph has a fingerprint (every attribute, child descriptors by their own fingerprints; handles and
// pointers left out). When a plan first runs, the engine and knobs of its configuration are recorded
// against the fingerprint of the heuristics query that produced it (its graph and mode), in
// $ORTFLEET_CUDNN_CHOICES/<GPU>-cudnn<version>.txt. A later process that makes the same query gets that
// one configuration, built from the engine's global index and knob choices, instead of cuDNN's heuristics
// and their list of candidates. A configuration cuDNN refuses to build, or whose plan does not build, is
// replaced by cuDNN's own query at once: nothing fails that would not have failed without this library.
//
// It uses no cuDNN header: the numbers below are cuDNN 9's (cudnn_graph.h gives each an explicit value).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/environment.hpp"  // the names of the variables it reads (a header only: nothing is linked)

namespace {

using Desc = void*;
using Status = int;
constexpr Status kSuccess = 0;

// cudnnBackendDescriptorType_t
constexpr int kEngine = 2, kEngineCfg = 3, kEngineHeur = 4, kExecutionPlan = 5, kKnobChoice = 7, kKnobInfo = 8, kOperationGraph = 15,
              kVariantPack = 16;
// cudnnBackendAttributeName_t
constexpr int kHeurMode = 200, kHeurGraph = 201, kHeurResults = 202;
constexpr int kCfgEngine = 300, kCfgKnobChoices = 302;
constexpr int kPlanEngineConfig = 401;
constexpr int kKnobType = 600, kKnobValue = 601;
constexpr int kEngineGraph = 1300, kEngineGlobalIndex = 1301;
// cudnnBackendAttributeType_t
constexpr int kTypeHandle = 0, kTypeBoolean = 2, kTypeInt64 = 3, kTypeFloat = 4, kTypeDouble = 5, kTypeVoidPtr = 6, kTypeHeurMode = 8,
              kTypeKnobType = 9, kTypeDescriptor = 15, kTypeChar = 24, kTypeFraction = 26;
constexpr int kMaxKnobs = 64;  // more than any cuDNN 9 has (CUDNN_KNOB_TYPE_COUNTS is 44 in 9.19)

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

size_t element_size(int type) {
  switch (type) {
    case kTypeHandle: case kTypeVoidPtr: case kTypeDescriptor: return sizeof(void*);
    case kTypeInt64: case kTypeDouble: return 8;
    case kTypeBoolean: return sizeof(bool);
    case kTypeChar: return 1;
    case kTypeFloat: return 4;
    case kTypeFraction: return 16;
    default: return 4;  // the enums and INT32
  }
}

struct Attr {
  int type = 0;
  std::string bytes;
  std::vector<Desc> children;
};

/// An engine configuration: what a record keeps.
struct Choice {
  int64_t engine = -1;
  std::vector<std::pair<int, int64_t>> knobs;
  std::string text() const {
    std::ostringstream o;
    o << engine;
    for (const auto& [t, v] : knobs) o << ' ' << t << '=' << v;
    return o.str();
  }
};

struct Info {
  int type = -1;
  std::map<int, Attr> sets;  // the last value set of each attribute
  std::string fingerprint;   // cached once computed, dropped when an attribute changes
  bool replayed = false;     // a heuristics query answered from a record
  std::string key;           // a heuristics query's fingerprint
};

// What the counters measure, in ns, by kind of cuDNN work.
enum Kind { kHeuristics, kConfigs, kPlans, kExecute, kOther, kKinds };
const char* const kKindNames[kKinds] = {"heuristics", "engine_configs", "plan_build", "execute", "other"};

struct State {
  std::recursive_mutex mutex;
  std::unordered_map<Desc, Info> descriptors;
  std::unordered_map<Desc, std::string> config_key;   // an engine configuration -> the query it answered
  std::unordered_map<Desc, Choice> config_choice;     // configurations built from a record
  std::set<Desc> executed;
  std::map<std::string, Choice> records;              // read from the store, and recorded since
  std::string store;                                   // the store's file; "" until known
  bool store_read = false;
  int64_t ns[kKinds] = {};
  int64_t queries = 0, replayed = 0, refused = 0, recorded = 0;
  std::vector<Desc> kept;  // descriptors made for replayed configurations: alive for the process
};
State& state() {
  static auto* s = new State();  // never destroyed: cuDNN may be called during exit
  return *s;
}

// --- the real functions ----------------------------------------------------------------------------
using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym() {
  static const DlsymFn f = [] {
    void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (p == nullptr) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return reinterpret_cast<DlsymFn>(p);
  }();
  return f;
}
std::mutex reals_mutex;
std::map<std::string, void*>& reals() {
  static auto* m = new std::map<std::string, void*>();
  return *m;
}
void* cudnn_handle = nullptr;  // the handle the EP looked cuDNN's functions up in (reals_mutex)

// The backend entry points this library stands in for, and cuDNN's own function for each, kept current
// by dlsym below (an atomic load a call: every inference passes through Create, Set, Finalize, Execute
// and Destroy). Current, not cached once: cuDNN 9's libcudnn.so looks the same names up in its
// sub-libraries when first called, gets this library's functions, and calls them; by then the entry
// here is the sub-library's, so the call goes on to it instead of back into libcudnn.so without end.
enum class Entry { create, destroy, finalize, set, get, execute };
constexpr int kEntries = 6;
constexpr const char* kEntryNames[kEntries] = {"cudnnBackendCreateDescriptor", "cudnnBackendDestroyDescriptor", "cudnnBackendFinalize",
                                               "cudnnBackendSetAttribute",     "cudnnBackendGetAttribute",      "cudnnBackendExecute"};
std::atomic<void*> current_real[kEntries];
std::atomic<void*>& current(Entry e) { return current_real[static_cast<int>(e)]; }

template <class F>
F real(const char* name) {
  // cuDNN's own function: the pointer the EP's dlsym found, else looked up in the library the EP
  // opened (this library calls some the EP never looks up), else the next one loaded.
  std::lock_guard lock(reals_mutex);
  const auto it = reals().find(name);
  if (it != reals().end()) return reinterpret_cast<F>(it->second);
  void* found = cudnn_handle != nullptr ? real_dlsym()(cudnn_handle, name) : nullptr;
  if (found == nullptr) found = real_dlsym()(RTLD_NEXT, name);
  if (found != nullptr) reals()[name] = found;
  return reinterpret_cast<F>(found);
}
template <class F>
F real(Entry e) {
  if (void* p = current(e).load(std::memory_order_acquire)) return reinterpret_cast<F>(p);
  const F f = real<F>(kEntryNames[static_cast<int>(e)]);
  void* expected = nullptr;
  current(e).compare_exchange_strong(expected, reinterpret_cast<void*>(f));
  return f;
}
using CreateFn = Status (*)(int, Desc*);
using DestroyFn = Status (*)(Desc);
using FinalizeFn = Status (*)(Desc);
using SetFn = Status (*)(Desc, int, int, int64_t, const void*);
using GetFn = Status (*)(Desc, int, int, int64_t, int64_t*, void*);
using ExecuteFn = Status (*)(void*, Desc, Desc);
using VersionFn = size_t (*)();

Kind kind_of(int descriptor_type) {
  switch (descriptor_type) {
    case kEngineHeur: return kHeuristics;
    case kEngine: case kEngineCfg: case kKnobChoice: case kKnobInfo: return kConfigs;
    case kExecutionPlan: return kPlans;
    default: return kOther;
  }
}
void add_time(Kind k, int64_t ns) {
  std::lock_guard lock(state().mutex);
  state().ns[k] += ns;
}
int type_of(Desc d) {
  std::lock_guard lock(state().mutex);
  const auto it = state().descriptors.find(d);
  return it == state().descriptors.end() ? -1 : it->second.type;
}

/// A descriptor's content: its type and every attribute set on it, children by their own fingerprints.
std::string fingerprint(Desc d, int depth = 0) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto it = s.descriptors.find(d);
  if (it == s.descriptors.end() || depth > 32) return "?";
  Info& info = it->second;
  if (!info.fingerprint.empty()) return info.fingerprint;
  std::string text = "T" + std::to_string(info.type) + "{";
  for (const auto& [name, a] : info.sets) {
    if (a.type == kTypeHandle || a.type == kTypeVoidPtr) continue;  // differ from process to process
    text += std::to_string(name) + ":";
    if (a.type == kTypeDescriptor) {
      for (Desc c : a.children) text += fingerprint(c, depth + 1) + ",";
    } else {
      static const char* hex = "0123456789abcdef";
      for (unsigned char c : a.bytes) {
        text += hex[c >> 4];
        text += hex[c & 15];
      }
    }
    text += ";";
  }
  text += "}";
  uint64_t h = 1469598103934665603ull;  // FNV-1a: a short, stable key
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char key[48];
  std::snprintf(key, sizeof key, "%d:%016llx", info.type, static_cast<unsigned long long>(h));
  info.fingerprint = key;
  return info.fingerprint;
}

/// "NVIDIA_H100_80GB_HBM3-sm90": the GPU this process works on (a worker sees one), from the driver.
std::string gpu_name() {
  if (const char* fake = std::getenv(ortfleet::detail::env_name(ortfleet::detail::EnvVar::test_cudnn_device))) return fake;  // the tests' stand-in cuDNN, without a GPU
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (cuda == nullptr) return "";
  using GetFn2 = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  using AttrFn = int (*)(int*, int, int);
  auto get = reinterpret_cast<GetFn2>(real_dlsym()(cuda, "cuDeviceGet"));
  auto name = reinterpret_cast<NameFn>(real_dlsym()(cuda, "cuDeviceGetName"));
  auto attr = reinterpret_cast<AttrFn>(real_dlsym()(cuda, "cuDeviceGetAttribute"));
  int device = 0, major = 0, minor = 0;
  char text[128] = {};
  if (!get || !name || !attr || get(&device, 0) != 0 || name(text, sizeof text - 1, device) != 0) return "";
  attr(&major, 75, device);
  attr(&minor, 76, device);
  std::string out;
  for (const char* c = text; *c != '\0'; ++c) out += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
  return out + "-sm" + std::to_string(major) + std::to_string(minor);
}

/// The record file, opened without following a link and without waiting, or -1: anything but a regular
/// file at its name (a named pipe, which would hold the first convolution until someone wrote to it, a
/// device, a folder) is left alone and the choices are not kept.
int open_record(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    errno = EINVAL;  // not ENOENT: something stands there
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

/// The store of this GPU and cuDNN, read once (when the first query comes, cuDNN and the context are up).
void read_store() {
  auto& s = state();
  if (s.store_read) return;
  s.store_read = true;
  const char* folder = std::getenv(ortfleet::detail::env_name(ortfleet::detail::EnvVar::cudnn_choices));
  const auto version = real<VersionFn>("cudnnGetVersion");
  const std::string gpu = gpu_name();
  if (folder == nullptr || *folder == '\0' || version == nullptr || gpu.empty()) return;
  s.store = std::string(folder) + "/" + gpu + "-cudnn" + std::to_string(version()) + ".txt";
  std::string text;
  if (const int fd = open_record(s.store, O_RDONLY); fd >= 0) {
    char buffer[65536];
    for (ssize_t n = 0; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
    ::close(fd);
  } else if (errno != ENOENT) {
    s.store.clear();  // something that is not a record file stands at its name: keep nothing, touch nothing
    return;
  }
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    Choice c;
    if (!(fields >> key >> c.engine) || c.engine < 0) continue;
    std::string knob;
    while (fields >> knob) {
      const auto eq = knob.find('=');
      if (eq == std::string::npos) continue;
      c.knobs.emplace_back(std::atoi(knob.substr(0, eq).c_str()), std::atoll(knob.substr(eq + 1).c_str()));
    }
    if (static_cast<int>(c.knobs.size()) <= kMaxKnobs) s.records[key] = c;
  }
}

/// Appends one record (a line written at once: concurrent processes' lines do not interleave).
void append_record(const std::string& store, const std::string& key, const Choice& c) {
  if (store.empty()) return;
  const std::string line = key + " " + c.text() + "\n";
  const int fd = open_record(store, O_WRONLY | O_APPEND | O_CREAT);
  if (fd < 0) return;
  ::flock(fd, LOCK_EX);
  [[maybe_unused]] const ssize_t written = ::write(fd, line.data(), line.size());
  ::close(fd);
}

/// The engine and knobs of a configuration cuDNN made, read back.
bool read_choice(Desc cfg, Choice& out) {
  const auto create = real<CreateFn>(Entry::create);
  const auto get = real<GetFn>(Entry::get);
  const auto destroy = real<DestroyFn>(Entry::destroy);
  Desc engine = nullptr;
  if (create(kEngine, &engine) != kSuccess) return false;
  int64_t n = 0;
  const bool ok = get(cfg, kCfgEngine, kTypeDescriptor, 1, &n, &engine) == kSuccess &&
                  get(engine, kEngineGlobalIndex, kTypeInt64, 1, &n, &out.engine) == kSuccess;
  destroy(engine);
  if (!ok) return false;
  std::vector<Desc> knobs(kMaxKnobs, nullptr);
  for (auto& k : knobs) create(kKnobChoice, &k);
  int64_t got = 0;
  bool read = get(cfg, kCfgKnobChoices, kTypeDescriptor, kMaxKnobs, &got, knobs.data()) == kSuccess;
  for (int64_t i = 0; read && i < got && i < kMaxKnobs; ++i) {
    int type = 0;
    int64_t value = 0;
    read = get(knobs[i], kKnobType, kTypeKnobType, 1, &n, &type) == kSuccess && get(knobs[i], kKnobValue, kTypeInt64, 1, &n, &value) == kSuccess;
    out.knobs.emplace_back(type, value);
  }
  for (auto& k : knobs) destroy(k);
  return read;
}

void keep(Desc d) {
  std::lock_guard lock(state().mutex);
  state().kept.push_back(d);
}

/// Makes `cfg` (created by the caller) the configuration `c` of `graph`; false when cuDNN refuses.
bool build_choice(Desc cfg, Desc graph, const Choice& c) {
  const auto create = real<CreateFn>(Entry::create);
  const auto set = real<SetFn>(Entry::set);
  const auto finalize = real<FinalizeFn>(Entry::finalize);
  Desc engine = nullptr;
  if (create(kEngine, &engine) != kSuccess) return false;
  keep(engine);
  const int64_t index = c.engine;
  if (set(engine, kEngineGraph, kTypeDescriptor, 1, &graph) != kSuccess || set(engine, kEngineGlobalIndex, kTypeInt64, 1, &index) != kSuccess ||
      finalize(engine) != kSuccess) {
    return false;
  }
  std::vector<Desc> knobs;
  for (const auto& [type, value] : c.knobs) {
    Desc k = nullptr;
    if (create(kKnobChoice, &k) != kSuccess) return false;
    keep(k);
    const int t = type;
    const int64_t v = value;
    if (set(k, kKnobType, kTypeKnobType, 1, &t) != kSuccess || set(k, kKnobValue, kTypeInt64, 1, &v) != kSuccess || finalize(k) != kSuccess) {
      return false;
    }
    knobs.push_back(k);
  }
  if (set(cfg, kCfgEngine, kTypeDescriptor, 1, &engine) != kSuccess) return false;
  if (!knobs.empty() && set(cfg, kCfgKnobChoices, kTypeDescriptor, static_cast<int64_t>(knobs.size()), knobs.data()) != kSuccess) return false;
  return finalize(cfg) == kSuccess;
}

/// The graph and mode a replayed query was asked with (to run cuDNN's own query after all).
struct Query {
  Desc graph = nullptr;
  std::string mode;  // the HEUR_MODE attribute's bytes
};
std::unordered_map<Desc, Query>& replayed_queries() {
  static auto* m = new std::unordered_map<Desc, Query>();  // by the configuration built for it
  return *m;
}

/// A plan built from a replayed configuration failed: cuDNN's own query for its graph, its candidates in
/// order until one builds, as the frontend would have done.
Status rebuild_plan(Desc plan, const Query& q) {
  const auto create = real<CreateFn>(Entry::create);
  const auto set = real<SetFn>(Entry::set);
  const auto finalize = real<FinalizeFn>(Entry::finalize);
  const auto get = real<GetFn>(Entry::get);
  Desc heur = nullptr;
  if (create(kEngineHeur, &heur) != kSuccess) return 3000;
  keep(heur);
  int64_t count = 0;
  if (set(heur, kHeurGraph, kTypeDescriptor, 1, &q.graph) != kSuccess ||
      set(heur, kHeurMode, kTypeHeurMode, 1, q.mode.data()) != kSuccess || finalize(heur) != kSuccess ||
      get(heur, kHeurResults, kTypeDescriptor, 0, &count, nullptr) != kSuccess || count <= 0) {
    return 3000;  // CUDNN_STATUS_NOT_SUPPORTED
  }
  std::vector<Desc> configs(static_cast<size_t>(count), nullptr);
  for (auto& c : configs) {
    create(kEngineCfg, &c);
    keep(c);
  }
  if (get(heur, kHeurResults, kTypeDescriptor, count, &count, configs.data()) != kSuccess) return 3000;
  for (int64_t i = 0; i < count; ++i) {
    if (set(plan, kPlanEngineConfig, kTypeDescriptor, 1, &configs[static_cast<size_t>(i)]) == kSuccess && finalize(plan) == kSuccess) return kSuccess;
  }
  return 3000;
}

}  // namespace

extern "C" {
Status cudnnBackendCreateDescriptor(int type, Desc* d);
Status cudnnBackendDestroyDescriptor(Desc d);
Status cudnnBackendFinalize(Desc d);
Status cudnnBackendSetAttribute(Desc d, int name, int type, int64_t count, const void* values);
Status cudnnBackendGetAttribute(Desc d, int name, int type, int64_t requested, int64_t* count, void* values);
Status cudnnBackendExecute(void* handle, Desc plan, Desc pack);

// Every inference makes, fills, finalises and destroys a variant pack per convolution: those calls go
// straight to cuDNN (a cached pointer, no copy, no timing), so that steady inference is cuDNN's own.
// Only the descriptors a plan is built from are tracked, and only while plans are built.

__attribute__((visibility("default"))) Status cudnnBackendCreateDescriptor(int type, Desc* d) {
  const auto create = real<CreateFn>(Entry::create);
  if (type == kVariantPack) return create(type, d);
  const int64_t t = now_ns();
  const Status r = create(type, d);
  if (r == kSuccess) {
    std::lock_guard lock(state().mutex);
    Info& info = state().descriptors[*d];
    info = Info{};
    info.type = type;
  }
  add_time(kind_of(type), now_ns() - t);
  return r;
}

__attribute__((visibility("default"))) Status cudnnBackendDestroyDescriptor(Desc d) {
  const auto destroy = real<DestroyFn>(Entry::destroy);
  const int type = type_of(d);
  if (type < 0) return destroy(d);  // untracked (a variant pack)
  const int64_t t = now_ns();
  const Status r = destroy(d);
  add_time(kind_of(type), now_ns() - t);
  std::lock_guard lock(state().mutex);
  state().descriptors.erase(d);
  state().config_key.erase(d);
  state().config_choice.erase(d);
  state().executed.erase(d);
  replayed_queries().erase(d);
  return r;
}

__attribute__((visibility("default"))) Status cudnnBackendSetAttribute(Desc d, int name, int type, int64_t count, const void* values) {
  const auto set = real<SetFn>(Entry::set);
  const int dtype = type_of(d);
  if (dtype < 0) return set(d, name, type, count, values);
  const int64_t t = now_ns();
  const Status r = set(d, name, type, count, values);
  add_time(kind_of(dtype), now_ns() - t);
  if (r != kSuccess || values == nullptr || count < 0 || count > (1 << 16)) return r;
  Attr a;
  a.type = type;
  if (type == kTypeDescriptor) {
    const Desc* v = static_cast<const Desc*>(values);
    a.children.assign(v, v + count);
  } else {
    a.bytes.assign(static_cast<const char*>(values), element_size(type) * static_cast<size_t>(count));
  }
  std::lock_guard lock(state().mutex);
  const auto it = state().descriptors.find(d);
  if (it != state().descriptors.end()) {
    it->second.sets[name] = std::move(a);
    it->second.fingerprint.clear();
  }
  return r;
}

__attribute__((visibility("default"))) Status cudnnBackendFinalize(Desc d) {
  const auto finalize = real<FinalizeFn>(Entry::finalize);
  const int type = type_of(d);
  if (type < 0) return finalize(d);
  if (type == kEngineHeur) {
    const std::string key = fingerprint(d);
    std::lock_guard lock(state().mutex);
    read_store();
    ++state().queries;
    Info& info = state().descriptors[d];
    info.key = key;
    if (state().records.count(key) != 0) {
      info.replayed = true;  // no heuristics: the results come from the record
      return kSuccess;
    }
  }
  const int64_t t = now_ns();
  Status r = finalize(d);
  if (r != kSuccess && type == kExecutionPlan) {
    // A plan of a configuration built from a record that cuDNN would not build: its own query instead.
    Query q;
    Desc cfg = nullptr;
    {
      std::lock_guard lock(state().mutex);
      const auto& sets = state().descriptors[d].sets;
      const auto c = sets.find(kPlanEngineConfig);
      if (c != sets.end() && !c->second.children.empty()) cfg = c->second.children[0];
      const auto found = replayed_queries().find(cfg);
      if (found != replayed_queries().end()) q = found->second;
    }
    if (q.graph != nullptr) {
      r = rebuild_plan(d, q);
      std::lock_guard lock(state().mutex);
      ++state().refused;
      state().config_choice.erase(cfg);  // what runs now is recorded from cuDNN's own choice
    }
  }
  add_time(kind_of(type), now_ns() - t);
  if (r == kSuccess && type == kOperationGraph) fingerprint(d);
  return r;
}

__attribute__((visibility("default"))) Status cudnnBackendGetAttribute(Desc d, int name, int type, int64_t requested, int64_t* count,
                                                                        void* values) {
  const int dtype = type_of(d);
  const int64_t t = now_ns();
  if (dtype == kEngineHeur && name == kHeurResults) {
    Choice choice;
    Query q;
    std::string key;
    bool replayed = false;
    {
      std::lock_guard lock(state().mutex);
      Info& info = state().descriptors[d];
      replayed = info.replayed;
      key = info.key;
      if (replayed) {
        choice = state().records[key];
        const auto g = info.sets.find(kHeurGraph);
        if (g != info.sets.end() && !g->second.children.empty()) q.graph = g->second.children[0];
        const auto m = info.sets.find(kHeurMode);
        if (m != info.sets.end()) q.mode = m->second.bytes;
      }
    }
    if (replayed) {
      if (requested == 0 || values == nullptr) {
        if (count != nullptr) *count = 1;
        add_time(kConfigs, now_ns() - t);
        return kSuccess;
      }
      Desc cfg = static_cast<Desc*>(values)[0];
      if (q.graph != nullptr && build_choice(cfg, q.graph, choice)) {
        if (count != nullptr) *count = 1;
        std::lock_guard lock(state().mutex);
        ++state().replayed;
        state().config_key[cfg] = key;
        state().config_choice[cfg] = choice;
        replayed_queries()[cfg] = q;
        state().ns[kConfigs] += now_ns() - t;
        return kSuccess;
      }
      // cuDNN refused the recorded configuration: its own query after all.
      {
        std::lock_guard lock(state().mutex);
        state().descriptors[d].replayed = false;
        ++state().refused;
        state().records.erase(key);
      }
      const Status f = real<FinalizeFn>(Entry::finalize)(d);
      if (f != kSuccess) return f;
    }
    const Status r = real<GetFn>(Entry::get)(d, name, type, requested, count, values);
    add_time(kHeuristics, now_ns() - t);
    if (r == kSuccess && values != nullptr && count != nullptr) {
      std::lock_guard lock(state().mutex);
      for (int64_t i = 0; i < *count && i < requested; ++i) state().config_key[static_cast<Desc*>(values)[i]] = key;
    }
    return r;
  }
  const Status r = real<GetFn>(Entry::get)(d, name, type, requested, count, values);
  add_time(kind_of(dtype), now_ns() - t);
  return r;
}

__attribute__((visibility("default"))) Status cudnnBackendExecute(void* handle, Desc plan, Desc pack) {
  Desc cfg = nullptr;
  std::string key, store;
  Choice known;
  bool first = false, have = false;
  {
    std::lock_guard lock(state().mutex);
    first = state().executed.insert(plan).second;
    if (first) {
      const auto& sets = state().descriptors[plan].sets;
      const auto c = sets.find(kPlanEngineConfig);
      if (c != sets.end() && !c->second.children.empty()) cfg = c->second.children[0];
      const auto k = state().config_key.find(cfg);
      if (k != state().config_key.end()) key = k->second;
      const auto ch = state().config_choice.find(cfg);
      have = ch != state().config_choice.end();
      if (have) known = ch->second;
      store = state().store;
    }
  }
  if (first && !key.empty() && !have && read_choice(cfg, known)) {
    std::lock_guard lock(state().mutex);
    if (state().records.emplace(key, known).second) {
      ++state().recorded;
      append_record(store, key, known);
    }
  }
  const auto execute = real<ExecuteFn>(Entry::execute);
  if (!first) return execute(handle, plan, pack);
  const int64_t t = now_ns();  // a plan's first execution: where its kernels load
  const Status r = execute(handle, plan, pack);
  add_time(kExecute, now_ns() - t);
  return r;
}

/// dlsym, seen first: the backend calls above are handed out in place of cuDNN's.
__attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
  void* found = real_dlsym()(handle, name);
  if (found == nullptr || std::strncmp(name, "cudnn", 5) != 0) return found;
  static const std::map<std::string, void*> mine = {
      {"cudnnBackendCreateDescriptor", reinterpret_cast<void*>(&cudnnBackendCreateDescriptor)},
      {"cudnnBackendDestroyDescriptor", reinterpret_cast<void*>(&cudnnBackendDestroyDescriptor)},
      {"cudnnBackendFinalize", reinterpret_cast<void*>(&cudnnBackendFinalize)},
      {"cudnnBackendSetAttribute", reinterpret_cast<void*>(&cudnnBackendSetAttribute)},
      {"cudnnBackendGetAttribute", reinterpret_cast<void*>(&cudnnBackendGetAttribute)},
      {"cudnnBackendExecute", reinterpret_cast<void*>(&cudnnBackendExecute)}};
  const auto it = mine.find(name);
  if (it != mine.end() && found == it->second) return found;  // ours, by RTLD_DEFAULT: cuDNN's comes after
  {
    std::lock_guard lock(reals_mutex);
    reals()[name] = found;
    if (handle != RTLD_DEFAULT && handle != RTLD_NEXT) cudnn_handle = handle;
    for (int e = 0; e < kEntries; ++e) {
      if (std::strcmp(name, kEntryNames[e]) == 0) current_real[e].store(found, std::memory_order_release);
    }
  }
  return it == mine.end() ? found : it->second;
}

/// What this library did so far, as one line of JSON: ns by kind, and counts. The length written.
__attribute__((visibility("default"))) int ortfleet_cudnn_report(char* buffer, int size) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  std::string j = "{";
  for (int k = 0; k < kKinds; ++k) j += "\"" + std::string(kKindNames[k]) + "_ns\":" + std::to_string(s.ns[k]) + ",";
  j += "\"queries\":" + std::to_string(s.queries) + ",\"replayed\":" + std::to_string(s.replayed) + ",\"refused\":" + std::to_string(s.refused) +
       ",\"recorded\":" + std::to_string(s.recorded) + ",\"store\":\"" + s.store + "\"}";
  if (buffer == nullptr || size <= 0) return static_cast<int>(j.size());
  const size_t n = std::min(j.size(), static_cast<size_t>(size - 1));
  std::memcpy(buffer, j.data(), n);
  buffer[n] = '\0';
  return static_cast<int>(n);
}
}  // extern "C"
