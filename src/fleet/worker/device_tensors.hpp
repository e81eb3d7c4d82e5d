#pragma once
// Device tensors between a fleet and its workers without a trip through host memory. A tensor on the
// worker's GPU crosses as a reference to its memory that its provider shares between processes (CUDA
// IPC: cuIpcGetMemHandle), which the other side maps once per allocation (cuIpcOpenMemHandle, cached)
// and binds in place with IO binding.
// The caller's side (DeviceTensorsClient) sends references to its inputs and maps the outputs the
// worker leases to it; the worker's side (DeviceTensorsServer) maps the inputs and keeps each leased
// output (ONNX Runtime's value, in its arena) until the caller lets go of it. What cannot cross that
// way (a tensor on another GPU, memory the driver will not share, such as PyTorch's expandable
// segments) goes through host memory, with a note in the log and in the transfer counters.
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fleet/worker/wire.hpp"
#include "ortfleet/fleet/device_status.hpp"

namespace ortfleet::detail {

/// Mappings of other processes' device memory on one GPU, opened once per allocation. The most
/// recently used `capacity` stay open; older ones close once no tensor uses them.
class IpcMappings {
 public:
  IpcMappings(Device device, size_t capacity);
  /// `wire`'s tensor with its data in the mapped allocation (on this process's `device`); the tensor
  /// keeps the mapping open. Throws ortfleet::Error when the driver cannot map it.
  Tensor open(const WireTensor& wire);
  /// Allocations mapped so far, each time it was (again) mapped.
  uint64_t opens() const {
    std::lock_guard lock(mutex_);
    return opens_;
  }

 private:
  Device device_;
  size_t capacity_;
  mutable std::mutex mutex_;
  uint64_t opens_ = 0;  // under mutex_
  std::list<std::pair<std::string, std::shared_ptr<std::byte>>> recent_;  // each mapping's base, most recent first
};

/// The caller's side, for one worker (a WorkerChannel's).
class DeviceTensorsClient {
 public:
  explicit DeviceTensorsClient(Device worker_device);
  ~DeviceTensorsClient();
  DeviceTensorsClient(const DeviceTensorsClient&) = delete;
  DeviceTensorsClient& operator=(const DeviceTensorsClient&) = delete;

  /// The request for `inputs`: host tensors as they are; a tensor on the worker's GPU as a reference,
  /// once the caller's work queued on that GPU is done; any other device tensor copied to the host.
  /// It also hands back the output leases let go of since the last request.
  RingMessage request(const std::vector<Tensor>& inputs, bool outputs_on_device);
  /// Every input in host memory (device tensors copied): what the socket path carries.
  std::vector<Tensor> host_inputs(const std::vector<Tensor>& inputs);
  /// The outputs as the caller gets them: leased device outputs mapped in place, valid until their last
  /// copy goes (then the lease goes back to the worker with the next request) or the worker ends; host
  /// outputs as they are, uploaded to the worker's GPU when the caller asked for device outputs.
  std::vector<Tensor> outputs(std::vector<WireTensor> outputs, bool outputs_on_device);
  TransferCounters counters() const;

 private:
  struct Shared;  // what leased outputs hand back to; may outlive this
  class Lease;
  /// A note, once per kind of fallback, that device tensors go through host memory, and why.
  void note_once(const std::string& kind, const std::string& text);

  Device device_;
  std::shared_ptr<Shared> shared_;
  IpcMappings mappings_;
  std::set<std::string> noted_;  // under shared_'s mutex
};

/// The worker's side, for one channel. Used by one thread at a time (the channel's ring server).
class DeviceTensorsServer {
 public:
  explicit DeviceTensorsServer(Device device);
  /// The request's inputs, references mapped in place; first lets go of the leases it hands back.
  std::vector<Tensor> inputs(const RingMessage& request);
  /// The response for `outputs`: device outputs the caller asked to keep on the GPU leased to it by
  /// reference; everything else in host memory (device outputs copied).
  RingMessage response(std::vector<Tensor> outputs, bool outputs_on_device);
  /// Lets go of the leases of a response that was never delivered (it did not fit its slot).
  void discard(const RingMessage& response);
  size_t leases() const { return leases_.size(); }

 private:
  Device device_;
  IpcMappings mappings_;
  std::map<uint64_t, Tensor> leases_;  // outputs the caller holds, kept where they are
  uint64_t next_lease_ = 1;
  bool noted_ = false;
};

}  // namespace ortfleet::detail
