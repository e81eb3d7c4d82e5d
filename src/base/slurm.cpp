#include "base/slurm.hpp"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/system_paths.hpp"

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

std::optional<SlurmAllocation> slurm_allocation() {
  const auto job = env_var("SLURM_JOB_ID");
  if (!job) return std::nullopt;
  SlurmAllocation a;
  a.job_id = *job;
  a.step_id = env_var("SLURM_STEP_ID").value_or("");
  for (const char* variable : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    if (const auto gpus = env_var(variable)) {
      a.gpus = *gpus;
      a.gpus_variable = variable;
      break;
    }
  }
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) a.visible_devices = visible;
  if (const auto cpus = env_var("SLURM_CPUS_ON_NODE")) {
    try {
      a.cpus_on_node = std::max(0, std::stoi(*cpus));
    } catch (const std::exception&) {
      a.cpus_on_node = 0;
    }
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

bool SlurmJobWatch::is_step_of_job(int pid) const {
  // slurmstepd sets its title to "slurmstepd: [<job>.<step>]"; /proc/PID/cmdline shows it.
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  char head[96] = {};
  in.read(head, sizeof(head) - 1);
  const std::string title(head, static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  const std::string prefix = "slurmstepd: [" + job_id_ + ".";
  return title.compare(0, prefix.size(), prefix) == 0;
}

bool SlurmJobWatch::alive() {
  if (known_pid_ > 0 && is_step_of_job(known_pid_)) return true;
  known_pid_ = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) continue;
    int pid = 0;
    try {
      pid = std::stoi(name);
    } catch (const std::exception&) {
      continue;
    }
    if (is_step_of_job(pid)) {
      known_pid_ = pid;
      return true;
    }
  }
  return false;
}

}  // namespace ortfleet::detail
