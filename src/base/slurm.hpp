#pragma once
// Running under Slurm: what the scheduler gave this job or step (as it exports it in the
// environment), and whether a job still runs on this node. Read from the environment and /proc only:
// nothing here talks to slurmctld, so a check costs microseconds and no RPC.
#include <sys/types.h>

#include <optional>
#include <string>

namespace ortfleet::detail {

/// What Slurm exported into this process's environment.
struct SlurmAllocation {
  std::string job_id;   ///< SLURM_JOB_ID (an array task's own job id)
  std::string step_id;  ///< SLURM_STEP_ID; "" in a batch script
  /// SLURM_STEP_GPUS, else SLURM_JOB_GPUS: the GPUs (node indices) Slurm gave; "" when it gave none.
  std::string gpus;
  std::string gpus_variable;  ///< where `gpus` came from: "SLURM_STEP_GPUS" or "SLURM_JOB_GPUS"
  /// CUDA_VISIBLE_DEVICES as Slurm exported it (what the CUDA runtime sees); nullopt when unset.
  std::optional<std::string> visible_devices;
  int cpus_on_node = 0;  ///< SLURM_CPUS_ON_NODE; 0 when unset
  /// How many GPUs Slurm gave: the entries of CUDA_VISIBLE_DEVICES, else of `gpus`.
  int gpu_count() const;
  /// "job 123", or in a step "job 123 step 4".
  std::string described() const;
};

/// The allocation this process runs in, or nullopt outside Slurm (no SLURM_JOB_ID). Throws
/// ortfleet::Error naming the variable when SLURM_JOB_ID is not a plain job id (digits, or 123_4 for an
/// array task: ortfleet names files after it), SLURM_STEP_GPUS or SLURM_JOB_GPUS is not a list of GPU
/// indices, or SLURM_CPUS_ON_NODE is not a whole number.
std::optional<SlurmAllocation> slurm_allocation();

/// The real uid of process `pid` (from /proc/PID/status), or nullopt when it is gone.
std::optional<uid_t> process_real_uid(int pid);

/// The CPUs this process may run on: its affinity mask (which Slurm's task plugins narrow), at most
/// what Slurm gave the job on this node (SLURM_CPUS_ON_NODE) where it set no mask. At least 1.
int usable_cpus();

/// Whether Slurm job `job_id` still runs on this node: one of its steps' slurmstepd processes ("slurmstepd:
/// [123.batch]", "[123.0]", "[123.extern]") is alive, run by root or the account named slurm (the step
/// daemons' owner: slurmd's SlurmdUser, root by default); a process of any other user with that title
/// does not count. A batch job's batch step lives as long as the job,
/// so a daemon a job leaves on its node checks this to end with the job, whatever Slurm's process
/// tracking kills. The process found is remembered, so that a check costs one read of its cmdline
/// while it lives; /proc is scanned again only when it is gone.
class SlurmJobWatch {
 public:
  explicit SlurmJobWatch(std::string job_id) : job_id_(std::move(job_id)) {}
  const std::string& job_id() const { return job_id_; }
  bool alive();
  /// Whether a process of `uid` may be one of Slurm's step daemons: root, or the account named slurm.
  static bool step_daemon_owner(uid_t uid);

 private:
  bool is_step_of_job(int pid) const;
  std::string job_id_;
  int known_pid_ = -1;
};

}  // namespace ortfleet::detail
