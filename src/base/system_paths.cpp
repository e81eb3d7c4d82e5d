#include "base/system_paths.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

namespace ortfleet::detail {
namespace fs = std::filesystem;

fs::path own_binary_dir() {
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
