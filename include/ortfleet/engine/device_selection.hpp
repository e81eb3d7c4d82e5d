#pragma once
// The devices a device list means on this machine, and the device a one-device command uses when none
// is named (src/engine/providers/device_selection.cpp).
#include <string>
#include <string_view>
#include <vector>

#include "ortfleet/engine/devices.hpp"

namespace ortfleet {

/// The devices a device list means here, and for "all" why: what `--devices` and a Fleet without
/// devices use.
struct DeviceSelection {
  std::vector<Device> devices;
  /// For "all" under a Slurm allocation, what it chose and why, in words: "the 2 GPUs Slurm gave job
  /// 123 (CUDA_VISIBLE_DEVICES=0,1)", "the CPU: Slurm gave job 123 no GPU"; "" otherwise.
  std::string reason;
};

/// parse_devices(spec, gpu_count()), except that under a Slurm allocation (SLURM_JOB_ID set) "all"
/// means the GPUs Slurm gave this job or step, as it exports them (CUDA_VISIBLE_DEVICES, else
/// SLURM_STEP_GPUS or SLURM_JOB_GPUS), and the CPU where it gave none (never the GPUs of the node
/// that other jobs were given). Explicit lists are taken as written.
DeviceSelection select_devices(std::string_view spec);

/// The device a one-device command uses when none is named: GPU 0 if there is a GPU, else the CPU.
Device default_device();

}  // namespace ortfleet
