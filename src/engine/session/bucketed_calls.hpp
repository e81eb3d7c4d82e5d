// A call padded up to its bucket shape, run there, and its outputs cropped back: the buffers such
// calls go through, kept from one call to the next, and where their time went.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/runtime/execution_provider.hpp"
#include "engine/session/host_buffer_pool.hpp"
#include "engine/shapes/buckets.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

class BucketedCalls {
 public:
  /// Runs inputs padded to a bucket shape on that shape's session; on a GPU the outputs stay there
  /// when `outputs_on_device`.
  using RunPadded = std::function<std::vector<Tensor>(const std::vector<Tensor>& padded, bool outputs_on_device)>;

  BucketedCalls(Device device, std::map<std::string, double> pad_values);

  /// `given` (whose shapes are `shapes`) padded to `bucket`, run with `run`, and its outputs cropped
  /// back to what `given` makes: on the host, or on the session's GPU with `outputs_on_device`.
  std::vector<Tensor> call(const BucketPlan& plan, const std::vector<Tensor>& given, const InputShapes& shapes, const InputShapes& bucket,
                           bool outputs_on_device, const RunPadded& run);

  /// On a GPU, the buffers calls of `bucket_shapes` go through, made now at their largest: the
  /// staging of each input, each output's crop on the device, and pinned host memory for the outputs
  /// (`largest_outputs`: each output's bytes at its largest).
  void reserve(const std::vector<TensorSpec>& inputs, const std::vector<InputShapes>& bucket_shapes, const std::vector<TensorSpec>& outputs,
               const std::vector<size_t>& largest_outputs);

  BucketCallCosts costs() const;
  /// Frees the GPU buffers: before the context they live in goes.
  void release_device_buffers();

 private:
  /// A buffer on the GPU for tensor `name` of `shape` (`bytes`), kept under `purpose` for the next
  /// calls: the kept one when no call holds it and it is large enough, else a new one (kept when the
  /// kept one is free).
  Tensor gpu_buffer(const std::string& name, const std::string& purpose, ElementType type, const std::vector<int64_t>& shape, size_t bytes);
  /// `t` padded to `shape` on the GPU; `upload_ms` gets what a host input's copy took.
  Tensor padded_input(const Tensor& t, const std::vector<int64_t>& shape, double& upload_ms);
  /// An output cropped to `shape`, on the host or the GPU; `copy_down_ms` gets what the copy to the
  /// host took.
  Tensor cropped_output(const Tensor& t, const std::vector<int64_t>& shape, bool on_device, double& copy_down_ms);
  void record(BucketCallTime call);

  Device device_;
  const DeviceMemory* memory_;  // the device's own, or null: the CPU's calls are padded in host memory
  std::map<std::string, double> pad_values_;
  // The padded inputs (by input and bucket shape), the staging a host input crosses the bus into
  // before it is padded, the cropped outputs on their way to the host. Allocating and freeing 10 MB
  // per call cost more than the copy.
  std::mutex buffers_mutex_;
  std::map<std::string, Tensor> buffers_;
  // Host memory for the outputs, recycled: a fresh buffer's page faults cost more than the copy.
  HostBufferPool host_outputs_;
  mutable std::mutex costs_mutex_;
  BucketCallCosts costs_;
  std::set<std::string> buckets_called_;  // the bucket shapes that had a call: the next one's is not their first
};

}  // namespace ortfleet::detail
