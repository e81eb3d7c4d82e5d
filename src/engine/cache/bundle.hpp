#pragma once
// A cache bundle (made by ModelCache::export_bundle, bundle_export.cpp; read by
// ModelCache::import_bundle, bundle_import.cpp) is a POSIX tar: ortfleet-bundle.json first (the
// versions, the devices, the entries and every member's size and XXH64), then per entry
// models/ENTRY, models/ENTRY.data, models/ENTRY.manifest.json and models/ENTRY.shape-costs.json (those
// it has), so that `tar tvf` lists it and `tar xf` into a folder gives a cache layout. Import trusts
// none of it until all of it is checked: the members are written into a private staging folder inside
// the cache, checked against the bundle's manifest and each entry's own manifest, and only then
// published one entry at a time, the way a start publishes the entry it made (under the entry's lock,
// the graph renamed into place last).
// Here: the layout both sides share, and the facts of this build and machine a manifest records.
#include <cstdint>
#include <string>
#include <vector>

namespace ortfleet::detail {

constexpr int kBundleFormat = 1;
constexpr const char* kBundleManifest = "ortfleet-bundle.json";
constexpr const char* kMembersFolder = "models/";

/// What an entry may carry beside its graph, in the order they are written and published (the graph last).
inline const std::vector<std::string> kCompanions = {".data", ".shape-costs.json", ".manifest.json"};

/// This build's version (ORTFLEET_VERSION), "unknown" without it.
const char* ortfleet_version();
/// This machine's host name ("" when it cannot be read).
std::string host_name();
/// The GPU architecture of a device class ("cuda-sm_90" gives "sm_90"), "" for a CPU class.
std::string gpu_architecture(const std::string& device_class);
/// The whole of a file's bytes ("" when it cannot be read).
std::string read_text(const std::string& path);

}  // namespace ortfleet::detail
