#include "base/slurm.hpp"

#include <pwd.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <thread>

#include "base/system_paths.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/number_text.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

namespace {
/// The entries of a comma-separated list, as CUDA reads CUDA_VISIBLE_DEVICES: up to the first empty
/// or negative one ("" and "-1" hide every GPU).
int list_length(const std::string& list) {
  int n = 0;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    std::string item = list.substr(at, comma - at);
    item.erase(0, item.find_first_not_of(" \t"));
    if (item.empty() || item.front() == '-') break;
    ++n;
    at = comma + 1;
  }
  return n;
}
}  // namespace

int SlurmAllocation::gpu_count() const { return list_length(visible_devices ? *visible_devices : gpus); }

std::string SlurmAllocation::described() const { return "job " + job_id + (step_id.empty() ? "" : " step " + step_id); }

namespace {
bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

/// A job id as Slurm writes it: digits, or an array task's "<job>_<task>". ortfleet names files after
/// it (the job's pool socket), so nothing else may pass: no "/", no "..", nothing empty.
bool plain_job_id(std::string_view id) {
  const size_t underscore = id.find('_');
  if (underscore == std::string_view::npos) return all_digits(id);
  return all_digits(id.substr(0, underscore)) && all_digits(id.substr(underscore + 1));
}

/// A GPU list as Slurm exports it: node indices ("0,1"), ranges of them ("0-3") allowed.
bool gpu_index_list(std::string_view list) {
  size_t at = 0;
  while (true) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string_view item = list.substr(at, comma - at);
    const size_t dash = item.find('-');
    const bool ok = dash == std::string_view::npos ? all_digits(item) : all_digits(item.substr(0, dash)) && all_digits(item.substr(dash + 1));
    if (!ok) return false;
    if (comma == list.size()) return true;
    at = comma + 1;
  }
}

constexpr const char* kSlurmHint = "Run it in a job as Slurm set it up, or unset the SLURM_* variables outside Slurm";
}  // namespace

std::optional<SlurmAllocation> slurm_allocation() {
  const auto job = env_var("SLURM_JOB_ID");
  if (!job) return std::nullopt;
  if (!plain_job_id(*job)) {
    throw Error("SLURM_JOB_ID='" + *job + "' is not a Slurm job id (digits, or 123_4 for an array task)", kSlurmHint);
  }
  SlurmAllocation a;
  a.job_id = *job;
  a.step_id = env_var("SLURM_STEP_ID").value_or("");
  for (const char* variable : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    if (const auto gpus = env_var(variable)) {
      if (!gpu_index_list(*gpus)) {
        throw Error(std::string(variable) + "='" + *gpus + "' is not a list of GPU indices (such as 0,1)", kSlurmHint);
      }
      a.gpus = *gpus;
      a.gpus_variable = variable;
      break;
    }
  }
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) a.visible_devices = visible;
  if (const auto cpus = env_var("SLURM_CPUS_ON_NODE")) {
    const auto count = parse_whole(*cpus);
    if (!count || *count < 1 || *count > 1 << 20) {
      throw Error("SLURM_CPUS_ON_NODE='" + *cpus + "' is not a whole number of CPUs", kSlurmHint);
    }
    a.cpus_on_node = static_cast<int>(*count);
  }
  return a;
}

int usable_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  int cpus = ::sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : 0;
  if (cpus <= 0) cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (const auto slurm = slurm_allocation(); slurm && slurm->cpus_on_node > 0) cpus = std::min(cpus, slurm->cpus_on_node);
  return std::max(1, cpus);
}

std::optional<uid_t> process_real_uid(int pid) {
  // /proc/PID/status, not the owner of /proc/PID: a process that made itself undumpable shows its
  // folder as root's whoever runs it.
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Uid:", 0) != 0) continue;
    const size_t start = line.find_first_not_of(" \t", 4);
    const size_t end = line.find_first_of(" \t", start);
    if (start == std::string::npos) return std::nullopt;
    const auto uid = parse_whole(std::string_view(line).substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (!uid || *uid < 0) return std::nullopt;
    return static_cast<uid_t>(*uid);
  }
  return std::nullopt;
}

bool SlurmJobWatch::step_daemon_owner(uid_t uid) {
  if (uid == 0) return true;
  // A site whose slurmd runs as its own account (SlurmdUser=slurm) has its step daemons run as that account.
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[1024];
  return ::getpwnam_r("slurm", &entry, buffer, sizeof(buffer), &found) == 0 && found != nullptr && found->pw_uid == uid;
}

bool SlurmJobWatch::is_step_of_job(int pid) const {
  // slurmstepd sets its title to "slurmstepd: [<job>.<step>]"; /proc/PID/cmdline shows it. Any user
  // can give a process that title: only one run by Slurm's step daemon's owner counts.
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  char head[96] = {};
  in.read(head, sizeof(head) - 1);
  const std::string title(head, static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  const std::string prefix = "slurmstepd: [" + job_id_ + ".";
  if (title.compare(0, prefix.size(), prefix) != 0) return false;
  const auto owner = process_real_uid(pid);
  return owner && step_daemon_owner(*owner);
}

bool SlurmJobWatch::alive() {
  if (known_pid_ > 0 && is_step_of_job(known_pid_)) return true;
  known_pid_ = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    const auto pid = parse_whole(name);
    if (!pid || *pid <= 0 || *pid > INT32_MAX) continue;
    if (is_step_of_job(static_cast<int>(*pid))) {
      known_pid_ = static_cast<int>(*pid);
      return true;
    }
  }
  return false;
}

}  // namespace ortfleet::detail
