#pragma once
// The fleet's wire format: what crosses between a Fleet and its worker processes, and between a
// started process and whoever reads its report (bench, profile, tune). One encoding each for start
// plans, device status, structured errors, tensor specs and tensors in shared memory.
#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/ort_environment.hpp"
#include "fleet/core/device_status.hpp"
#include "fleet/local/local_start.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {

nlohmann::json plan_to_json(const LocalStartPlan& plan);
LocalStartPlan plan_from_json(const nlohmann::json& j);

/// A status as status_to_json (fleet/core/device_status.hpp) wrote it. Throws ortfleet::Error (via
/// nlohmann's exceptions turned into one) on a malformed status.
DeviceStatus status_from_json(const nlohmann::json& j);

/// An error as data: what failed, the hint and the device keep their places across processes.
/// Exceptions other than ortfleet::Error travel as their what() text.
nlohmann::json error_to_json(const std::exception& e);
/// The error again; `where` names the device when the sender did not.
Error error_from_json(const nlohmann::json& j, const std::string& where);

/// ONNX Runtime's warnings a worker hands its parent with a reply (the "ort_warnings" field of any
/// reply): [[message, count], ...]. Reading skips entries that are not a string and a count.
nlohmann::json ort_warnings_to_json(const std::vector<OrtWarningCount>& warnings);
std::vector<OrtWarningCount> ort_warnings_from_json(const nlohmann::json& j);

nlohmann::json specs_to_json(const std::vector<TensorSpec>& specs);
std::vector<TensorSpec> specs_from_json(const nlohmann::json& j);

/// Copies host tensors into one shared buffer (grown when too small); returns their descriptions
/// (name, type, shape, offset, bytes).
nlohmann::json pack_tensors(const std::vector<Tensor>& tensors, std::shared_ptr<SharedBuffer>& buffer);
/// Tensors that view a shared buffer in place; each keeps the mapping alive. Throws ortfleet::Error
/// when a description does not fit the buffer or its shape.
std::vector<Tensor> unpack_tensors(const nlohmann::json& descriptions, const std::shared_ptr<SharedBuffer>& buffer);

// What a request ring's slot carries (process/request_ring.hpp): a binary table, no JSON on the hot
// path. A header (flags, the output leases the caller let go of), then per tensor its element type,
// rank, where it lies, name length, offset and bytes, its dimensions and name; the data follows, each
// tensor aligned: a host tensor's bytes, or for a device tensor a CUDA IPC reference to its memory.
// Offsets count from the start of the area, so the bytes can be copied to another slot as they are.

/// A device tensor another process reaches in place: the IPC handle of the allocation that holds it,
/// where in the allocation it starts, and (an output) the lease that keeps it there.
struct CudaIpcRef {
  std::array<std::byte, 64> handle{};
  uint64_t offset = 0;
  uint64_t lease = 0;  ///< a worker's output held for the caller until it lets go; 0 for inputs
};

/// A tensor on the wire. With `ipc`, the tensor's name, type, shape, bytes and device describe the
/// memory `ipc` refers to, and its data is null until the receiver maps it.
struct WireTensor {
  Tensor tensor;
  std::optional<CudaIpcRef> ipc;
};

/// A request or a response in a ring slot.
struct RingMessage {
  std::vector<WireTensor> tensors;
  bool outputs_on_device = false;  ///< request: the caller wants the outputs left on the GPU
  std::vector<uint64_t> released;  ///< request: output leases the caller no longer uses
};

/// The bytes write_ring_message() takes for `message`.
size_t ring_message_bytes(const RingMessage& message);
/// Writes `message` at `area`; returns the bytes written (ring_message_bytes). Throws ortfleet::Error
/// when it does not fit `capacity`, or a device tensor comes without its IPC reference.
size_t write_ring_message(const RingMessage& message, std::byte* area, size_t capacity);
/// The message at `area`: host tensors view `area` in place, each keeping `owner` alive; device
/// tensors carry their reference. Throws ortfleet::Error when the table does not fit `bytes` or a
/// tensor's bytes do not match its shape.
RingMessage read_ring_message(const std::byte* area, size_t bytes, const std::shared_ptr<void>& owner);
/// Host tensors as a message (the common case).
RingMessage host_message(const std::vector<Tensor>& tensors);

}  // namespace ortfleet::detail
