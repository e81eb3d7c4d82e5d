#pragma once
// The fleet's wire format: what crosses between a Fleet and its worker processes, and between a
// started process and whoever reads its report (bench, profile, tune). One encoding each for start
// plans, device status, structured errors, tensor specs and tensors in shared memory.
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fleet/local_start.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {

nlohmann::json plan_to_json(const LocalStartPlan& plan);
LocalStartPlan plan_from_json(const nlohmann::json& j);

nlohmann::json status_to_json(const DeviceStatus& status);
/// Throws ortfleet::Error (via nlohmann's exceptions turned into one) on a malformed status.
DeviceStatus status_from_json(const nlohmann::json& j);

/// An error as data: what failed, the hint and the device keep their places across processes.
/// Exceptions other than ortfleet::Error travel as their what() text.
nlohmann::json error_to_json(const std::exception& e);
/// The error again; `where` names the device when the sender did not.
Error error_from_json(const nlohmann::json& j, const std::string& where);

nlohmann::json specs_to_json(const std::vector<TensorSpec>& specs);
std::vector<TensorSpec> specs_from_json(const nlohmann::json& j);

/// Copies host tensors into one shared buffer (grown when too small); returns their descriptions
/// (name, type, shape, offset, bytes).
nlohmann::json pack_tensors(const std::vector<Tensor>& tensors, std::shared_ptr<SharedBuffer>& buffer);
/// Tensors that view a shared buffer in place; each keeps the mapping alive. Throws ortfleet::Error
/// when a description does not fit the buffer or its shape.
std::vector<Tensor> unpack_tensors(const nlohmann::json& descriptions, const std::shared_ptr<SharedBuffer>& buffer);

// Tensors in a request ring's slot (process/request_ring.hpp): a binary table, no JSON on the hot path.
// A count, then per tensor its element type, rank, name length, offset and bytes, its dimensions and
// name; the data follows, each tensor aligned. Offsets count from the start of the area, so the bytes
// can be copied to another slot as they are.

/// The bytes write_ring_tensors() takes for `tensors`.
size_t ring_tensors_bytes(const std::vector<Tensor>& tensors);
/// Writes host tensors at `area`; returns the bytes written (ring_tensors_bytes). Throws ortfleet::Error
/// when they do not fit `capacity` or a tensor is not in host memory.
size_t write_ring_tensors(const std::vector<Tensor>& tensors, std::byte* area, size_t capacity);
/// Tensors that view `area` in place, each keeping `owner` alive. Throws ortfleet::Error when the table
/// does not fit `bytes` or a tensor's bytes do not match its shape.
std::vector<Tensor> read_ring_tensors(const std::byte* area, size_t bytes, const std::shared_ptr<void>& owner);

}  // namespace ortfleet::detail
