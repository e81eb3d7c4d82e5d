// A stand-in for cuDNN's backend API, enough of it for the tests of libortfleet_cudnn.so on machines
// without a GPU: descriptors that keep what is set on them, heuristics that offer three engines (10, 11,
// 12) with one knob each, plans that build only from engines it knows, and a log of what it did
// ($FAKE_CUDNN_LOG: "heuristics" per query it ran, "execute ENGINE" per plan that ran). A plan whose knob
// value is 999 does not build (a configuration cuDNN accepts but cannot make a plan of).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace {
constexpr int kOk = 0, kBadParam = 2000, kNotSupported = 3000;
struct Desc {
  int type = 0;
  bool final = false;
  std::map<int, std::vector<uint8_t>> attrs;  // raw values
  std::map<int, std::vector<Desc*>> children;
};
std::mutex mu;
void log_line(const char* what, long long value) {
  const char* path = std::getenv("FAKE_CUDNN_LOG");
  if (path == nullptr) return;
  std::lock_guard lock(mu);
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s %lld\n", what, value);
    std::fclose(f);
  }
}
int64_t int_attr(const Desc* d, int name, int64_t fallback) {
  const auto it = d->attrs.find(name);
  if (it == d->attrs.end() || it->second.size() < 8) return fallback;
  int64_t v = 0;
  std::memcpy(&v, it->second.data(), 8);
  return v;
}
}  // namespace

extern "C" {
size_t cudnnGetVersion() { return 91900; }

int cudnnBackendCreateDescriptor(int type, void** d) {
  *d = new Desc{type};
  return kOk;
}
int cudnnBackendDestroyDescriptor(void* d) {
  delete static_cast<Desc*>(d);
  return kOk;
}
int cudnnBackendSetAttribute(void* dv, int name, int type, int64_t count, const void* values) {
  auto* d = static_cast<Desc*>(dv);
  if (type == 15) {  // descriptors
    const auto* v = static_cast<Desc* const*>(values);
    d->children[name].assign(v, v + count);
  } else {
    const size_t size = type == 3 ? 8 : 4;
    const auto* bytes = static_cast<const uint8_t*>(values);
    d->attrs[name].assign(bytes, bytes + size * static_cast<size_t>(count));
  }
  return kOk;
}
int cudnnBackendFinalize(void* dv) {
  auto* d = static_cast<Desc*>(dv);
  if (d->type == 4) log_line("heuristics", 1);  // ENGINEHEUR: the work a record saves
  if (d->type == 2) {                           // ENGINE: only the engines the heuristics offer
    const int64_t index = int_attr(d, 1301, -1);
    if (index < 10 || index > 12) return kNotSupported;
  }
  if (d->type == 5) {  // EXECUTION_PLAN: from a finalized configuration, whose knob is not 999
    const auto cfg = d->children.find(401);
    if (cfg == d->children.end() || cfg->second.empty() || !cfg->second[0]->final) return kBadParam;
    const auto& knobs = cfg->second[0]->children[302];
    if (!knobs.empty() && int_attr(knobs[0], 601, 0) == 999) return kNotSupported;
  }
  d->final = true;
  return kOk;
}
int cudnnBackendGetAttribute(void* dv, int name, int /*type*/, int64_t requested, int64_t* count, void* values) {
  auto* d = static_cast<Desc*>(dv);
  if (d->type == 4 && name == 202) {  // ENGINEHEUR_RESULTS
    if (!d->final) return kBadParam;
    if (count) *count = requested == 0 ? 3 : std::min<int64_t>(requested, 3);
    for (int64_t i = 0; values != nullptr && i < std::min<int64_t>(requested, 3); ++i) {
      auto* cfg = static_cast<Desc**>(values)[i];
      auto* engine = new Desc{2};
      const int64_t index = 10 + i;
      engine->attrs[1301].assign(reinterpret_cast<const uint8_t*>(&index), reinterpret_cast<const uint8_t*>(&index) + 8);
      engine->final = true;
      auto* knob = new Desc{7};
      const int type = 5;
      const int64_t value = 100 + i;
      knob->attrs[600].assign(reinterpret_cast<const uint8_t*>(&type), reinterpret_cast<const uint8_t*>(&type) + 4);
      knob->attrs[601].assign(reinterpret_cast<const uint8_t*>(&value), reinterpret_cast<const uint8_t*>(&value) + 8);
      cfg->children[300] = {engine};
      cfg->children[302] = {knob};
      cfg->final = true;
    }
    return kOk;
  }
  if (d->type == 3 && name == 300) {  // ENGINECFG_ENGINE, into the caller's descriptor
    auto* out = static_cast<Desc**>(values)[0];
    const Desc* engine = d->children[300].empty() ? nullptr : d->children[300][0];
    if (engine == nullptr) return kBadParam;
    out->attrs = engine->attrs;
    if (count) *count = 1;
    return kOk;
  }
  if (d->type == 3 && name == 302) {  // ENGINECFG_KNOB_CHOICES
    const auto& knobs = d->children[302];
    int64_t n = 0;
    for (; n < static_cast<int64_t>(knobs.size()) && n < requested; ++n) static_cast<Desc**>(values)[n]->attrs = knobs[static_cast<size_t>(n)]->attrs;
    if (count) *count = n;
    return kOk;
  }
  if ((d->type == 2 && name == 1301) || (d->type == 7 && (name == 600 || name == 601))) {
    const auto& bytes = d->attrs[name];
    std::memcpy(values, bytes.data(), bytes.size());
    if (count) *count = 1;
    return kOk;
  }
  return kNotSupported;
}
int cudnnBackendExecute(void* /*handle*/, void* plan, void* /*pack*/) {
  const auto* p = static_cast<Desc*>(plan);
  const Desc* cfg = p->children.at(401)[0];
  const Desc* engine = cfg->children.at(300)[0];
  log_line("execute", static_cast<long long>(int_attr(engine, 1301, -1)));
  return kOk;
}
}  // extern "C"
