#include "fleet/worker/worker_sessions.hpp"

#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "base/content_hash.hpp"
#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "base/system_paths.hpp"
#include "base/termination_cleanup.hpp"
#include "engine/cache/model_digest.hpp"
#include "engine/cuda/cuda_driver.hpp"
#include "fleet/local/plan_paths.hpp"
#include "fleet/worker/cache_fill.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/base/number_text.hpp"
#include "ortfleet/synth/synth.hpp"
#include "process/spawn.hpp"

namespace ortfleet::detail {
using nlohmann::json;

namespace {

/// The test hooks ORTFLEET_TEST_WORKER_START_DELAY and _INIT_DELAY (`variable`): sleeps when it names
/// this worker's device.
void delay_if_asked(EnvVar variable, const std::string& device) {
  const auto setting = env_value(variable);  // checked: DEVICE=SECONDS, else refused in one line naming it
  if (!setting) return;
  const auto equals = setting->rfind('=');
  if (setting->substr(0, equals) != device) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(parse_decimal(setting->substr(equals + 1)).value_or(0)));
}

/// The primer's folder: "ortfleet-primer-<pid>-" and mkdtemp's six letters and digits, mode 0700, and
/// in it the throwaway models below (and a writer's hidden partial file of one).
constexpr const char* kPrimerPrefix = "ortfleet-primer-";
constexpr const char* kPrimerModels[] = {"convolutions.onnx", "attention.onnx"};

/// The pid of a primer folder named exactly as the primer names one; 0 for any other name.
int primer_folder_pid(const std::string& name) {
  const std::string prefix = kPrimerPrefix;
  if (name.rfind(prefix, 0) != 0) return 0;
  const auto dash = name.find('-', prefix.size());
  int pid = 0;
  const char* digits = name.data() + prefix.size();
  const char* end = name.data() + (dash == std::string::npos ? name.size() : dash);
  if (dash == std::string::npos || digits == end || *digits == '0' || std::from_chars(digits, end, pid).ptr != end || pid <= 0) return 0;
  const std::string suffix = name.substr(dash + 1);
  if (suffix.size() != 6 || !std::all_of(suffix.begin(), suffix.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; })) return 0;
  return pid;
}

/// Whether `name` in a primer folder is what the primer writes there: one of its models, or a writer's
/// hidden partial file of one (".convolutions.onnx.ortfleet-...").
bool primer_file(const std::string& name) {
  return std::any_of(std::begin(kPrimerModels), std::end(kPrimerModels), [&](const std::string& model) {
    return name == model || name.rfind("." + model + ".ortfleet-", 0) == 0;
  });
}

/// Primer folders of workers that died while they primed, killed where no handler runs (SIGKILL, the
/// OOM killer): removed when that pid is gone and the folder is exactly as the primer makes one (its
/// name, this user's, mode 0700, holding only the primer's files). Anything else stays: a pid alive,
/// another user's, a name or a content of another form.
void remove_primer_folders_of_dead_workers(const std::filesystem::path& temporary) {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(temporary, ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::filesystem::path folder = it->path();
    const int pid = primer_folder_pid(folder.filename().string());
    if (pid == 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to signal): its own
    struct stat st {};
    if (::lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 07777) != 0700) continue;
    std::vector<std::filesystem::path> files;
    bool ours = true;
    std::error_code listed;
    for (auto f = std::filesystem::directory_iterator(folder, listed); ours && !listed && f != std::filesystem::directory_iterator(); f.increment(listed)) {
      struct stat file {};
      ours = ::lstat(f->path().c_str(), &file) == 0 && S_ISREG(file.st_mode) && primer_file(f->path().filename().string());
      files.push_back(f->path());
    }
    if (!ours || listed) continue;
    for (const auto& f : files) ::unlink(f.c_str());
    ::rmdir(folder.c_str());
  }
}

}  // namespace

json WorkerSessions::initialise(const LocalStartPlan& given, size_t max_resident, bool prime) {
  const LocalStartPlan plan = with_absolute_paths(given, origin_);
  std::lock_guard starting(start_mutex_);
  delay_if_asked(EnvVar::test_worker_init_delay, lane());
  initialised_ = true;
  Timeline timeline(main_ns_);
  add_process_start(timeline);
  const PreparedRuntime prepared = prepare_runtime(plan, timeline);
  if (prepared.error) throw *prepared.error;
  for (const auto& e : prepared.device_errors) {
    if (e) throw *e;
  }
  if (prime) prime_libraries(plan, timeline);
  if (max_resident > 0) max_resident_ = max_resident;
  return answer_to(message::init, {{"timeline", on_my_lane(timeline)}});
}

json WorkerSessions::start(const LocalStartPlan& given, std::vector<std::string>& held) {
  const LocalStartPlan plan = with_absolute_paths(given, origin_);
  // A resident session is handed out at once, never behind another model's creation. Only a session of
  // the same layout can be this one: where none is resident, the model's content is hashed beside the
  // session's making (a 5 GB model's weights read before its start cost more than the start).
  const std::string layout = layout_key(plan);
  std::optional<std::string> key;
  if (has_layout(layout)) {
    key = session_key(plan);
    if (auto resident = hand_out_resident(*key, held)) return *resident;
  }
  std::lock_guard starting(start_mutex_);  // one creation at a time: they would contend for one GPU
  if (!key && has_layout(layout)) key = session_key(plan);  // one of its layout was made while this start waited
  if (key) {
    if (auto resident = hand_out_resident(*key, held)) return *resident;
  }
  std::future<std::string> keyed = key ? std::async(std::launch::deferred, [&key] { return *key; })
                                       : std::async(std::launch::async, [this, &plan] { return session_key(plan); });
  delay_if_asked(EnvVar::test_worker_start_delay, lane());
  auto session = std::make_shared<ResidentSession>();
  session->timeline = std::make_unique<Timeline>(main_ns_);
  Timeline& timeline = *session->timeline;
  if (!initialised_) {
    // A worker that was not initialised first starts from its exec: show its process start too.
    add_process_start(timeline);
    initialised_ = true;
  }
  session->layout = layout;
  session->model_path = plan.model_path;
  session->plan = plan_to_json(plan);
  session->result = start_one(plan, timeline);
  if (session->result.error && is_out_of_memory(*session->result.error) && evict(/*keep=*/0) > 0) {
    spdlog::info("{}: out of device memory; evicted the sessions nobody held and starting again", lane());
    session->result = start_one(plan, timeline);
  }
  if (session->result.error) throw *session->result.error;
  session->key = keyed.get();
  DeviceStatus status = ready_status(session->result);
  if (plan.price_cache_entry) price_entry(plan, *session, status);
  session->last_used_ns = monotonic_ns();
  {
    std::lock_guard lock(mutex_);
    sessions_[session->key] = session;
  }
  hold(session->key, held);
  evict(max_resident_);
  // Making a session frees much of what it read (a model's bytes, ONNX Runtime's graph copies) into
  // the C heap, which keeps it: handed back, the worker's resident memory is what its sessions use.
  ::malloc_trim(0);
  return ready_message(*session, status, timeline);
}

std::optional<json> WorkerSessions::hand_out_resident(const std::string& key, std::vector<std::string>& held) {
  auto resident = find(key);
  if (!resident) return std::nullopt;
  hold(key, held);
  auto status = ready_status(resident->result);
  status.ready_ns = monotonic_ns();
  status.resident = true;
  return ready_message(*resident, status, Timeline(monotonic_ns()));
}

json WorkerSessions::trim() {
  const std::string parts = env_value(EnvVar::park_trim).value_or("arena,heap,stack");
  const auto asked = [&parts](const char* part) { return parts.find(part) != std::string::npos; };
  json done = json::object();
  if (asked("arena")) {
    std::vector<std::shared_ptr<ResidentSession>> idle;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [key, s] : sessions_) {
        if (s->holders == 0 && s->result.session) idle.push_back(s);
      }
    }
    int shrunk = 0;
    for (const auto& s : idle) shrunk += s->result.session->release_spare_memory() ? 1 : 0;
    done["arenas_shrunk"] = shrunk;
  }
  if (asked("stack") && device_.is_cuda()) {  // CUDA's per-thread stack reserve (cuda_driver.hpp: set_stack_size)
    try {
      done["stack_bytes"] = CudaDriver::instance().set_stack_size(cuda_ordinal(device_), 0);
    } catch (const Error& e) {
      done["stack_error"] = e.what();
    }
  }
  if (asked("heap")) done["heap_trimmed"] = ::malloc_trim(0) == 1;
  return answer_to(message::trim, done);
}

std::shared_ptr<ResidentSession> WorkerSessions::to_run(const std::string& key) {
  auto session = find(key);
  if (session == nullptr) {
    throw Error("no session '" + key + "' on " + device_.to_string() + " (it was evicted or never started)",
                "Start the model again", device_.to_string());
  }
  return session;
}

std::shared_ptr<ResidentSession> WorkerSessions::find(const std::string& key) {
  std::lock_guard lock(mutex_);
  const auto it = sessions_.find(key);
  if (it == sessions_.end()) return nullptr;
  it->second->last_used_ns = monotonic_ns();
  return it->second;
}

void WorkerSessions::hold(const std::string& key, std::vector<std::string>& held) {
  std::lock_guard lock(mutex_);
  const auto it = sessions_.find(key);
  if (it == sessions_.end()) throw Error("no session '" + key + "' on " + lane(), "Start it first", lane());
  ++it->second->holders;
  held.push_back(key);
}

void WorkerSessions::release(std::string key, std::vector<std::string>& held) {  // a copy: it may be an element of `held`
  const auto mine = std::find(held.begin(), held.end(), key);
  if (mine == held.end()) return;  // not held by this channel: nothing to let go
  held.erase(mine);
  std::lock_guard lock(mutex_);
  const auto it = sessions_.find(key);
  if (it != sessions_.end()) it->second->holders = std::max(0, it->second->holders - 1);
}

void WorkerSessions::release_all(std::vector<std::string>& held) {
  while (!held.empty()) release(held.back(), held);
}

size_t WorkerSessions::evict(size_t keep) {
  std::vector<std::shared_ptr<ResidentSession>> dropped;  // destroyed outside the lock
  {
    std::lock_guard lock(mutex_);
    while (sessions_.size() > keep) {
      auto oldest = sessions_.end();
      for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
        if (it->second->holders == 0 && (oldest == sessions_.end() || it->second->last_used_ns < oldest->second->last_used_ns)) oldest = it;
      }
      if (oldest == sessions_.end()) break;
      spdlog::debug("{}: evicting {} (least recently used, nobody holds it)", lane(), oldest->second->model_path);
      dropped.push_back(oldest->second);
      sessions_.erase(oldest);
    }
  }
  const size_t count = dropped.size();
  dropped.clear();  // the sessions go here, outside the lock
  // What they held goes back to the system, not to the C heap: a worker emptied for the next new model
  // (a pool's spare) holds its own floor again.
  if (count > 0) ::malloc_trim(0);
  return count;
}

size_t WorkerSessions::evict_model(const std::string& model_path) {
  std::vector<std::shared_ptr<ResidentSession>> dropped;  // destroyed outside the lock
  {
    std::lock_guard lock(mutex_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->second->holders != 0 || it->second->model_path != model_path) {
        ++it;
        continue;
      }
      spdlog::debug("{}: evicting {} (its file changed)", lane(), model_path);
      dropped.push_back(it->second);
      it = sessions_.erase(it);
    }
  }
  const size_t count = dropped.size();
  dropped.clear();
  if (count > 0) ::malloc_trim(0);
  return count;
}

json WorkerSessions::status(bool with_plans) {
  std::lock_guard lock(mutex_);
  json list = json::array();
  const int64_t now = monotonic_ns();
  for (const auto& [key, s] : sessions_) {
    json entry = {{"session", key},
                  {"model", s->model_path},
                  {"holders", s->holders},
                  {"idle_s", static_cast<double>(now - s->last_used_ns) / 1e9},
                  {"memory_bytes", s->result.memory_bytes},
                  {"model_cache", s->result.session ? s->result.session->model_cache_outcome() : std::string()}};  // made from the entry: "hit"
    if (s->result.session) {
      const SessionTier tier = s->result.session->tier();
      if (tier.stage != SessionTier::Stage::none) entry["tier"] = {{"stage", to_string(tier.stage)}, {"full_ms", tier.full_ms}, {"note", tier.note}};
    }
    if (with_plans) entry["plan"] = s->plan;
    list.push_back(std::move(entry));
  }
  // No CUDA call here: a parked worker (its CUDA calls locked by the driver) answers too.
  return answer_to(message::status, {{"device", device_.to_string()}, {"pid", ::getpid()}, {"sessions", list},
                                      {"cuda_visible_devices", env_var("CUDA_VISIBLE_DEVICES").value_or("")},
                                      {"max_resident_sessions", max_resident_}});
}

void WorkerSessions::clear() {
  std::lock_guard lock(mutex_);
  sessions_.clear();  // sessions release their GPU memory before the process ends
}

void WorkerSessions::add_process_start(Timeline& timeline) const {
  if (auto spawn = env_number(EnvVar::spawn_ns)) timeline.add({phase::process_start, lane(), static_cast<int64_t>(*spawn), main_ns_, 0, {}});
}

json WorkerSessions::on_my_lane(const Timeline& timeline) const {
  Timeline mine(timeline.origin_ns());
  for (auto e : timeline.events()) {
    if (e.lane == "process") e.lane = lane();
    mine.add(std::move(e));
  }
  return json::parse(mine.to_json());
}

void WorkerSessions::price_entry(const LocalStartPlan& plan, const ResidentSession& made, DeviceStatus& status) {
  const Session& session = *made.result.session;
  if (session.model_cache_outcome() != "miss") return;  // an entry was written (or its making failed: pricing then finds none)
  try {
    if (const auto gain = price_cache_entry(plan, session.model_cache_entry())) {
      status.model_cache_note = std::string("its entry ") + gain->text() + (gain->pays() ? "" : ": later starts load the model itself");
    }
  } catch (const std::exception& e) {
    spdlog::debug("{}: the new cache entry was not priced ({}); later starts use it", lane(), e.what());
  }
}

void WorkerSessions::prime_libraries(const LocalStartPlan& plan, Timeline& timeline) {
  auto p = timeline.scope(phase::libraries_prime, lane());
  try {
    remove_primer_folders_of_dead_workers(std::filesystem::temp_directory_path());
    const auto folder = PrivateDir::temporary(kPrimerPrefix + std::to_string(::getpid()));
    // A worker stopped while it primes (a job's Ctrl-C, a pool stopped) leaves no folder in TMPDIR.
    const RemoveOnTermination on_stop({folder.path().string()});
    const std::filesystem::path convolutions_path = folder.path() / kPrimerModels[0], attention_path = folder.path() / kPrimerModels[1];
    synth::ResNetSpec convolutions;
    convolutions.depth = 18;
    convolutions.width = 0.125;
    convolutions.image_size = 32;
    synth::TransformerSpec attention;
    attention.layers = 1;
    attention.hidden = 64;
    attention.heads = 2;
    attention.ffn_multiplier = 2;
    attention.sequence = 16;
    attention.vocabulary = 64;
    const std::string models[] = {synth::write_resnet(convolutions_path.string(), convolutions).path,
                                  synth::write_transformer(attention_path.string(), attention).path};
    Timeline scratch(main_ns_);  // the primer's own phases stay out of the worker's report
    for (const auto& model : models) {
      LocalStartPlan primer = plan;
      primer.model_path = model;
      primer.config.session.optimized_model_cache = false;
      primer.profile_dir.clear();
      // What the pool's config says of one model (a job's, which left the pool) is not the primer's:
      // its warm-up inputs, shapes and node assignments name another model's inputs and nodes, and its
      // files may be gone with the job.
      primer.config.warmup = {};
      primer.config.shapes = {};
      primer.config.session.custom_op_libraries.clear();
      primer.config.session.config_entries.erase(kNodeAssignmentByName);
      primer.config.session.config_entries.erase(kNodeAssignmentByLayer);
      const LocalDeviceResult r = start_one(primer, scratch);
      if (r.error) throw *r.error;
    }
  } catch (const std::exception& e) {
    p.arg("error", e.what());
    spdlog::debug("{}: priming cuDNN and cuBLAS failed ({}); the first session pays their start", lane(), e.what());
  }
}

LocalDeviceResult WorkerSessions::start_one(const LocalStartPlan& plan, Timeline& timeline) {
  std::vector<LocalDeviceResult> results;
  start_locally(plan, timeline, results, [](size_t) {});
  if (results.empty()) throw Error("the start request named no device");
  return std::move(results.front());
}

std::string WorkerSessions::plan_text(const LocalStartPlan& plan) {
  LocalStartPlan keyed = plan;
  keyed.model_path.clear();  // keyed by its content (or layout), not by its path
  keyed.profile_dir.clear();
  // Neither changes the session: how its cache entry gets made, and what the start leaves behind.
  keyed.config.session.model_cache_fill = ModelCacheFill::background;
  keyed.config.warm_pool = {};
  keyed.price_cache_entry = false;
  json j = plan_to_json(keyed);
  const RuntimeInfo& runtime = load_runtime(plan.ort_library);
  j["runtime"] = runtime.library_path + "@" + runtime.version;
  return j.dump();
}

std::string WorkerSessions::session_key(const LocalStartPlan& plan) const {
  const std::string text = plan_text(plan) + "|" + model_content(plan.model_path, memo_dir()).text;
  return hex64(xxh64(text.data(), text.size()));
}

std::string WorkerSessions::layout_key(const LocalStartPlan& plan) {
  std::string text = plan_text(plan) + "|";
  try {
    text += model_layout(plan.model_path);
  } catch (const std::exception&) {
    text += "unreadable";  // the start says why; nothing resident can be it
  }
  return hex64(xxh64(text.data(), text.size()));
}

bool WorkerSessions::has_layout(const std::string& layout) {
  std::lock_guard lock(mutex_);
  return std::any_of(sessions_.begin(), sessions_.end(), [&](const auto& s) { return s.second->layout == layout; });
}

std::string WorkerSessions::memo_dir() {
  try {
    const auto root = ModelCache::find_default_root();
    return root ? ModelCache().dir() : std::string();
  } catch (const std::exception&) {
    return {};
  }
}

json WorkerSessions::ready_message(const ResidentSession& s, const DeviceStatus& status, const Timeline& timeline) const {
  return answer_to(message::start, {{"session", s.key},
                                    {"status", status_to_json(status)},
                                    {"inputs", specs_to_json(s.result.session->inputs())},
                                    {"outputs", specs_to_json(s.result.session->outputs())},
                                    {"timeline", on_my_lane(timeline)}});
}

}  // namespace ortfleet::detail
