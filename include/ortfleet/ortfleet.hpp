#pragma once
// ortfleet: ONNX Runtime sessions started fast on every GPU of a node and kept warm, and start-up
// explained. The one header a program includes:
//
//   #include <ortfleet/ortfleet.hpp>
//
//   ortfleet::FleetOptions options;                       // devices: every GPU (or what Slurm gave)
//   ortfleet::Fleet fleet("model.onnx", options);
//   fleet.start();
//   if (!fleet.wait()) { /* fleet.status() says which device failed and why */ }
//   auto outputs = fleet.run(fleet.devices().front(), ortfleet::random_inputs(fleet.inputs(), 1));
//
// What it brings, by what a program does with it:
//   start a model on many devices ......... Fleet, FleetOptions, Strategy, DeviceStatus (fleet/fleet.hpp)
//   one session on one device ............. Session, SessionSpec (engine/session.hpp)
//   devices, tensors, options ............. Device, select_devices, Tensor, copy_to_device, RunConfig
//   keep workers warm for later jobs ...... WorkerPool (fleet/worker_pool.hpp), serve_pool, PoolServer
//   the optimised-model cache ............. ModelCache (engine/cache.hpp)
//   the runtime, errors, the log .......... load_runtime, Error, set_log_handler
//   explain a machine or a start .......... doctor, bench, profile, tune (diagnostics/)
//   models without Python ................. synth::write_resnet, ... (synth/synth.hpp)
// The headers under ortfleet/<layer>/ are this header's parts (and the command line's and the Python
// module's, which include a few more of them): a program includes this one, so that their layout may
// change without it noticing.
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/log.hpp"
#include "ortfleet/diagnostics/bench.hpp"
#include "ortfleet/diagnostics/doctor.hpp"
#include "ortfleet/diagnostics/profile.hpp"
#include "ortfleet/diagnostics/tune.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "ortfleet/engine/device_tensor.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/options.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "ortfleet/engine/timeline.hpp"
#include "ortfleet/fleet/device_status.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "ortfleet/fleet/worker_pool.hpp"
#include "ortfleet/synth/synth.hpp"
