// Parked workers, carried out through the device's provider (worker_parking.hpp).
#include "fleet/pool/worker_parking.hpp"

#include <signal.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "base/environment.hpp"

#include "engine/providers/provider_registry.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet::detail {

namespace {
/// Tests only (ORTFLEET_TEST_PARK_CPU=1): a CPU worker "parks" stopped by SIGSTOP and is continued on
/// restore, so that the pool's parking (which worker, when, what a claim meanwhile does, that nothing
/// runs on a parked worker) is tested where no GPU is.
bool cpu_parks_for_tests(const Device& device) {
  return provider_for(device).memory() == nullptr && env_on(EnvVar::test_park_cpu).value_or(false);  // a device without memory of its own
}

void signal_worker(const WorkerProcess& worker, int signal, const char* doing) {
  if (::kill(worker.pid(), signal) != 0) throw Error(fmt::format("cannot {} the worker pid {}: {}", doing, worker.pid(), std::strerror(errno)));
}
}  // namespace

std::optional<std::string> WorkerParking::unavailable(const Device& device) {
  if (cpu_parks_for_tests(device)) return std::nullopt;
  return provider_for(device).parking().unavailable();
}

void WorkerParking::park(const WorkerProcess& worker, double lock_timeout_s) {
  if (auto no = unavailable(worker.device())) throw Error(*no);
  if (cpu_parks_for_tests(worker.device())) return signal_worker(worker, SIGSTOP, "stop");
  provider_for(worker.device()).parking().park(worker.pid(), lock_timeout_s);
}

void WorkerParking::unpark(const WorkerProcess& worker) {
  if (cpu_parks_for_tests(worker.device())) return signal_worker(worker, SIGCONT, "continue");
  provider_for(worker.device()).parking().unpark(worker.pid());
}

bool entry_holds_less(const Device& device) { return provider_for(device).memory() != nullptr || cpu_parks_for_tests(device); }

ParkingStatus parking_status(const std::vector<Device>& devices, double park_after_s) {
  if (!(park_after_s > 0)) return {ParkingStatus::State::off, named(Setting::park_after, "0")};
  if (devices.empty()) return {ParkingStatus::State::unavailable, "no devices"};
  for (const auto& d : devices) {
    if (auto no = WorkerParking::unavailable(d)) return {ParkingStatus::State::unavailable, *no};
  }
  return {ParkingStatus::State::on, ""};
}

namespace {
constexpr std::pair<ParkingStatus::State, const char*> kStates[] = {
    {ParkingStatus::State::on, "on"}, {ParkingStatus::State::off, "off"}, {ParkingStatus::State::unavailable, "unavailable"}};
}

nlohmann::json to_json(const ParkingStatus& parking) {
  for (const auto& [state, word] : kStates) {
    if (state == parking.state) return {{"state", word}, {"why", parking.why}};
  }
  return nullptr;
}

ParkingStatus parking_from_json(const nlohmann::json& j) {
  if (j.is_object()) {
    const std::string state = text_field(j, "state");
    for (const auto& [value, word] : kStates) {
      if (state == word) return {value, text_field(j, "why")};
    }
  }
  return {ParkingStatus::State::unavailable, j.is_string() ? j.get<std::string>() : j.dump()};
}

}  // namespace ortfleet::detail
