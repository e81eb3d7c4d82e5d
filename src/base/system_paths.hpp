#pragma once
// Paths of this process and of the machine, shared by the runtime search and the worker launcher.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ortfleet::detail {

/// Folder of the running executable (/proc/self/exe), or of the shared object holding ortfleet
/// when it is loaded into another program (the Python extension); in a program built against an
/// installed ortfleet (find_package), that install's bin/, where its worker lies beside ../lib/onnxruntime.
std::filesystem::path own_binary_dir();

/// The ONNX Runtime copy scripts/fetch-onnxruntime.sh fetched for this build (empty when unknown).
std::filesystem::path fetched_ort_dir();

/// Whether `file` exists and was last written since this process started (/proc/self/stat's start time;
/// a second's slack for the boot time's rounding): a file named after this pid that an earlier process
/// of the same pid left behind does not count. Where the start time cannot be read, any such file counts.
bool written_since_this_process_started(const std::filesystem::path& file);

/// An environment variable, or nullopt when unset or empty.
std::optional<std::string> env_var(const char* name);

/// The folder ortfleet keeps this user's files in (the model cache, cuDNN's record, start records):
/// $ORTFLEET_CACHE, else $XDG_CACHE_HOME/ortfleet, else ~/.cache/ortfleet; nothing where none of them
/// is set (there is no shared fallback another user could write into).
std::optional<std::string> user_cache_root();

/// Sets the environment variable `name` to `value` unless it already holds it; returns whether it wrote.
/// setenv while another thread reads the environment (spawning a worker, ONNX Runtime or CUDA starting)
/// is a data race, so a variable already as asked is never written again.
bool set_env_where_different(const char* name, const std::string& value);

/// Folders that may hold Python packages on this machine: $VIRTUAL_ENV, $CONDA_PREFIX,
/// ~/.local, the lib/python3.*/site-packages of every python3 on $PATH, and the system folders.
std::vector<std::filesystem::path> python_package_dirs();

}  // namespace ortfleet::detail
