// A cache bundle's shared facts: this build's version, this machine's name, a device class's GPU
// architecture, and a file read whole (bundle.hpp says what a bundle is).
#include "engine/cache/bundle.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace ortfleet::detail {

const char* ortfleet_version() {
#ifdef ORTFLEET_VERSION
  return ORTFLEET_VERSION;
#else
  return "unknown";
#endif
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string();
}

std::string gpu_architecture(const std::string& device_class) {
  return device_class.rfind("cuda-", 0) == 0 ? device_class.substr(5) : std::string();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace ortfleet::detail
