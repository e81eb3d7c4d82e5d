#include "ortfleet/engine/device_selection.hpp"

#include <fmt/format.h>

#include "base/slurm.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/cuda_devices.hpp"

namespace ortfleet {

// A device list's numbers and "all" name CUDA GPUs (parse_devices), the GPUs a Slurm job is given are
// exported for CUDA (CUDA_VISIBLE_DEVICES): counted without initialising the driver (gpu_count).
DeviceSelection select_devices(std::string_view spec) {
  const auto slurm = detail::slurm_allocation();
  if (!slurm || !means_all_devices(spec)) {
    DeviceSelection chosen{parse_devices(spec, gpu_count()), ""};
    check_cpu_devices_fit(chosen.devices);
    return chosen;
  }
  const std::string job = slurm->described();
  const std::string cpus = slurm->cpus_on_node > 0 ? fmt::format(" ({} CPU{} of this node)", slurm->cpus_on_node, slurm->cpus_on_node == 1 ? "" : "s") : std::string();
  if (slurm->visible_devices) {
    // CUDA sees what CUDA_VISIBLE_DEVICES lists: Slurm's choice when it gave GPUs, else the user's own.
    const int usable = gpu_count();
    const std::string visible = "CUDA_VISIBLE_DEVICES=" + *slurm->visible_devices;
    if (usable == 0) {
      return {{Device::cpu()}, fmt::format("the CPU{}: {} names no GPU this node has usable ({})", cpus, visible, job)};
    }
    const std::string whose = slurm->gpus.empty() ? fmt::format("of {} ({} was given no GPU by Slurm itself)", visible, job)
                                                  : fmt::format("Slurm gave {} ({})", job, visible);
    return {parse_devices("all", usable), fmt::format("the {} GPU{} {}", usable, usable == 1 ? "" : "s", whose)};
  }
  if (!slurm->gpus.empty()) {
    // GPUs given, but not exported for CUDA: take the node indices Slurm names as CUDA ordinals.
    std::vector<Device> devices;
    try {
      devices = parse_devices(slurm->gpus, gpu_count());
    } catch (const Error& e) {
      throw Error(fmt::format("{}={} (what Slurm gave {}, taken as CUDA ordinals since CUDA_VISIBLE_DEVICES is not set): {}", slurm->gpus_variable,
                              slurm->gpus, job, e.what_failed()),
                  "Run it in a job as Slurm set it up, or give " + named(Setting::devices) + " yourself");
    }
    return {devices, fmt::format("the {} GPU{} Slurm gave {} ({}={}; CUDA_VISIBLE_DEVICES is not set, so they are taken as CUDA ordinals)",
                                 devices.size(), devices.size() == 1 ? "" : "s", job, slurm->gpus_variable, slurm->gpus)};
  }
  return {{Device::cpu()}, fmt::format("the CPU{}: Slurm gave {} no GPU (ask for GPUs with --gpus=N or --gres=gpu:N; {} "
                                       "uses GPUs it did not give)", cpus, job, named(Setting::devices, "0,1"))};
}

Device default_device() { return gpu_count() > 0 ? Device::cuda(0) : Device::cpu(); }

}  // namespace ortfleet
