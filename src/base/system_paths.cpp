#include "base/system_paths.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "base/environment.hpp"
#include "ortfleet/base/number_text.hpp"

namespace ortfleet::detail {
namespace {

/// This process's start, in seconds since the Unix epoch, or nullopt: /proc/self/stat's 22nd field (clock
/// ticks after boot) added to /proc/stat's btime (the boot, in whole seconds).
std::optional<double> process_start_unix_s() {
  std::ifstream self("/proc/self/stat");
  std::string stat;
  std::getline(self, stat);
  const auto name_end = stat.rfind(')');  // the program's name, in parentheses, may hold spaces
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(name_end + 1));
  std::string field;
  int read = 0;
  while (read < 20 && fields >> field) ++read;  // fields 3..22 follow the name: the 20th is starttime
  const auto ticks = read == 20 ? parse_whole(field) : std::nullopt;
  if (!ticks) return std::nullopt;
  std::ifstream machine("/proc/stat");
  std::string line;
  while (std::getline(machine, line)) {
    if (line.rfind("btime ", 0) != 0) continue;
    const auto boot = parse_whole(std::string_view(line).substr(6));
    const long ticks_per_s = ::sysconf(_SC_CLK_TCK);
    if (!boot || ticks_per_s <= 0) return std::nullopt;
    return static_cast<double>(*boot) + static_cast<double>(*ticks) / static_cast<double>(ticks_per_s);
  }
  return std::nullopt;
}

}  // namespace

bool written_since_this_process_started(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return false;
  static const std::optional<double> start = process_start_unix_s();
  if (!start) return true;
  const double written = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
  return written >= *start - 1.0;
}

namespace fs = std::filesystem;

}  // namespace ortfleet::detail

// The bin/ folder of the installed ortfleet a program was built against: ortfleet's package config
// (lib/cmake/ortfleet/ortfleetConfig.cmake) compiles a definition of it into each executable that
// links ortfleet::ortfleet, since a static libortfleet.a cannot find its install by its own address.
// Weak and undefined elsewhere: null in ortfleet's own binaries, its tests and the Python extension.
extern "C" __attribute__((weak)) const char ortfleet_installed_bin_dir[];

namespace ortfleet::detail {

fs::path own_binary_dir() {
  // A program built against an install finds ortfleet's worker and ONNX Runtime in that install.
  if (ortfleet_installed_bin_dir != nullptr && *ortfleet_installed_bin_dir != '\0') {
    std::error_code ec;
    fs::path installed = fs::canonical(ortfleet_installed_bin_dir, ec);
    if (!ec && fs::is_directory(installed, ec)) return installed;
  }
  Dl_info info{};
  // The address of this function lies in whichever binary holds libortfleet: the tool or the
  // Python extension module.
  if (dladdr(reinterpret_cast<void*>(&own_binary_dir), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    fs::path p = fs::canonical(info.dli_fname, ec);
    if (!ec) return p.parent_path();
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

fs::path fetched_ort_dir() {
#ifdef ORTFLEET_FETCHED_ORT_DIR
  return ORTFLEET_FETCHED_ORT_DIR;  // set by the build (src/CMakeLists.txt)
#else
  return {};
#endif
}

std::optional<std::string> env_var(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::optional<std::string> user_cache_root() {
  if (auto v = env_value(EnvVar::cache)) return *v;
  if (auto v = env_var("XDG_CACHE_HOME")) return (fs::path(*v) / "ortfleet").string();
  if (auto v = env_var("HOME")) return (fs::path(*v) / ".cache" / "ortfleet").string();
  return std::nullopt;
}

bool set_env_where_different(const char* name, const std::string& value) {
  const char* now = std::getenv(name);
  if (now != nullptr && value == now) return false;
  ::setenv(name, value.c_str(), /*overwrite=*/1);
  return true;
}

namespace {
void add_site_dirs(const fs::path& prefix, std::vector<fs::path>& out) {
  std::error_code ec;
  fs::path lib = prefix / "lib";
  if (!fs::is_directory(lib, ec)) return;
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(lib, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("python3", 0) != 0) continue;
    for (const char* leaf : {"site-packages", "dist-packages"}) {
      if (fs::is_directory(entry.path() / leaf, ec)) found.push_back(entry.path() / leaf);
    }
  }
  std::sort(found.rbegin(), found.rend());  // newest Python first
  out.insert(out.end(), found.begin(), found.end());
}
}  // namespace

std::vector<fs::path> python_package_dirs() {
  std::vector<fs::path> dirs;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (auto v = env_var(var)) add_site_dirs(*v, dirs);
  }
  if (auto home = env_var("HOME")) add_site_dirs(fs::path(*home) / ".local", dirs);
  if (auto path = env_var("PATH")) {
    std::stringstream ss(*path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      std::error_code ec;
      if (!dir.empty() && fs::exists(fs::path(dir) / "python3", ec)) add_site_dirs(fs::path(dir).parent_path(), dirs);
    }
  }
  add_site_dirs("/usr/local", dirs);
  dirs.emplace_back("/usr/lib/python3/dist-packages");
  std::vector<fs::path> unique;
  std::set<fs::path> seen;
  for (auto& d : dirs) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(d, ec);
    if (seen.insert(c).second) unique.push_back(d);
  }
  return unique;
}

}  // namespace ortfleet::detail
