#include "ortfleet/engine/devices.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include "base/slurm.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet {

std::string Device::to_string() const {
  if (kind == Kind::cuda) return "cuda:" + std::to_string(index);
  return index == 0 ? "cpu" : "cpu:" + std::to_string(index);
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int> to_int(std::string_view s) {
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < 0) return std::nullopt;
  return value;
}

std::string gpus_present(int gpu_count) {
  if (gpu_count == 0) return "this machine has no usable GPU; use " + named(Setting::devices, "cpu");
  if (gpu_count == 1) return "this machine has 1 GPU: cuda:0";
  return "this machine has " + std::to_string(gpu_count) + " GPUs: cuda:0 to cuda:" + std::to_string(gpu_count - 1);
}

[[noreturn]] void bad_item(std::string_view item, const std::string& why) {
  throw Error("unknown device '" + std::string(item) + "'" + (why.empty() ? "" : ": " + why),
              "Write devices as all, cpu, cpu*N, 0,1,2, 0-3 or cuda:0,cuda:1");
}

}  // namespace

Device Device::parse(std::string_view text) {
  text = trim(text);
  if (text == "cpu") return Device::cpu();
  if (text.rfind("cpu:", 0) == 0) {
    if (auto n = to_int(text.substr(4))) return Device::cpu(*n);
  } else if (text.rfind("cuda:", 0) == 0) {
    if (auto n = to_int(text.substr(5))) return Device::cuda(*n);
  }
  bad_item(text, "");
}

std::string to_string(const std::vector<Device>& devices) {
  std::string out;
  for (const auto& d : devices) out += (out.empty() ? "" : ",") + d.to_string();
  return out;
}

bool means_all_devices(std::string_view spec) {
  spec = trim(spec);
  return spec.empty() || spec == "all";
}

std::vector<Device> parse_devices(std::string_view spec, int gpu_count) {
  spec = trim(spec);
  if (means_all_devices(spec)) {
    if (gpu_count == 0) return {Device::cpu()};
    std::vector<Device> all;
    for (int i = 0; i < gpu_count; ++i) all.push_back(Device::cuda(i));
    return all;
  }
  std::vector<Device> devices;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    std::string_view item = trim(spec.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) bad_item(item, "empty entry");
    if (item.rfind("cpu", 0) == 0) {
      std::string_view rest = item.substr(3);
      if (rest.empty()) {
        devices.push_back(Device::cpu());
      } else if (rest.front() == '*') {
        auto n = to_int(rest.substr(1));
        if (!n || *n < 1 || *n > 256) bad_item(item, "cpu*N takes N from 1 to 256");
        for (int i = 0; i < *n; ++i) devices.push_back(Device::cpu(i));
      } else if (rest.front() == ':') {
        auto n = to_int(rest.substr(1));
        if (!n) bad_item(item, "");
        devices.push_back(Device::cpu(*n));
      } else {
        bad_item(item, "");
      }
      continue;
    }
    if (item.rfind("cuda:", 0) == 0) item.remove_prefix(5);
    else if (item.rfind("gpu:", 0) == 0) item.remove_prefix(4);
    const size_t dash = item.find('-');
    auto first = to_int(item.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : to_int(item.substr(dash + 1));
    if (!first || !last || *last < *first) bad_item(item, "");
    for (int i = *first; i <= *last; ++i) {
      if (i >= gpu_count) {
        throw Error("no GPU cuda:" + std::to_string(i) + " (" + gpus_present(gpu_count) + ")",
                    "Pick devices from 'ortfleet doctor'");
      }
      devices.push_back(Device::cuda(i));
    }
  }
  std::set<Device> seen;
  for (const auto& d : devices) {
    if (!seen.insert(d).second) throw Error("device " + d.to_string() + " is listed twice", "List each device once");
  }
  return devices;
}

void check_cpu_devices_fit(const std::vector<Device>& devices) {
  const auto cpus = static_cast<int>(std::count_if(devices.begin(), devices.end(), [](const Device& d) { return d.kind == Device::Kind::cpu; }));
  const int usable = detail::usable_cpus();
  if (cpus <= usable) return;
  throw Error(fmt::format("{} CPU sessions asked for, and this process may use {} CPU{}: at most {}, one per core", cpus, usable,
                          usable == 1 ? "" : "s", usable),
              fmt::format("Ask for cpu*{} or fewer: more sessions than cores only take turns on them", usable));
}

}  // namespace ortfleet
