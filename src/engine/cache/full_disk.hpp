#pragma once
// Whether a write failed because its disk is full, said as such: the model cache's writes
// (write_failure) and the diagnostics' reading of what ONNX Runtime wrote (its log, its profile) tell a
// full disk from a broken file by this one check, so that a full disk is never blamed on the file.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ortfleet::detail {

/// The bytes an unprivileged process may still write on the file system holding `folder` (statvfs),
/// or nothing where that cannot be told.
std::optional<uint64_t> free_bytes(const std::string& folder);
/// How the check measures free space (tests give their own).
using FreeSpaceProbe = std::function<std::optional<uint64_t>(const std::string& folder)>;
/// Below this much free space a disk counts as full: ONNX Runtime's writes fail well before 0.
inline constexpr uint64_t kFullBelowBytes = uint64_t{1} << 20;

/// "the disk holding FOLDER is full (No space left on device; N bytes free there)" when it is: less
/// than kFullBelowBytes free there, or `why` (what a failing call said; may be empty) says so in
/// errno's words or ONNX Runtime's ("the disk is full"). "" when it is not.
std::string full_disk_text(const std::string& folder, const std::string& why = {}, const FreeSpaceProbe& probe = free_bytes);

}  // namespace ortfleet::detail
