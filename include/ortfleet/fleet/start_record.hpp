#pragma once
// What `ortfleet bench` measured on this machine, kept for Strategy::automatic to choose from: the
// machine's GPUs, how many devices the starts brought up, and each way's median start. One record per
// device count, in <cache root>/start-records/gpus-N.json (the cache root of ModelCache::default_root(),
// a folder only its user can write; a record elsewhere is never read).
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ortfleet {

/// The ways of starting a fleet on GPUs that a record compares, for Strategy::automatic to choose between.
enum class StartWay {
  workers,      ///< the fleet, a worker process per GPU (bench's row "fleet"; "fleet (1 device)" of one GPU)
  one_process,  ///< the fleet, every GPU in this process (bench's row "fleet, one process")
  threads,      ///< a thread per GPU in this process (bench's row "threads")
};
/// The way's name in a record's file: the label of the bench row that measures it ("fleet", "threads").
const char* to_string(StartWay way);
/// The way a bench row of `device_count` devices measures, if it measures one of them: "fleet" (or
/// "fleet (1 device)" of one device), "fleet, one process", "threads".
std::optional<StartWay> start_way_of_row(const std::string& label);
/// What a way is, in words: "a worker process per GPU", "the fleet in one process".
const char* start_way_words(StartWay way);

struct StartRecord {
  std::vector<std::string> gpus;           ///< the machine's GPU names, as machine_gpu_names() gives them
  int device_count = 0;                    ///< devices each measured start brought up
  std::string measured_at;                 ///< UTC, "2026-11-23T07:00:00Z"
  std::string source = "bench";            ///< the command that measured it
  std::string model;
  std::map<StartWay, double> start_ms;     ///< way -> mean ms until every device was ready (a file's other rows are left out)

  /// "2 x NVIDIA H200, bench of 2026-11-23"
  std::string described() const;
  std::string to_json() const;
  /// Throws ortfleet::Error naming `source_path` when the text is not a start record.
  static StartRecord from_json(const std::string& text, const std::string& source_path);
};

/// The names of the machine's GPUs in PCI bus order, read from the NVIDIA driver's /proc files (no
/// cuInit: a fleet asks before it starts); empty without the driver.
std::vector<std::string> machine_gpu_names();

/// Where the record for `device_count` devices lives under `root` (empty: the cache root).
std::string start_record_path(int device_count, const std::string& root = {});
/// Writes the record (whole or not at all). Throws ortfleet::Error when the folder is not private or
/// cannot be written.
void save_start_record(const StartRecord& record, const std::string& root = {});
/// The record for `device_count` devices made on a machine with these GPUs (default: this machine's),
/// if one was saved; a malformed record counts as none.
std::optional<StartRecord> find_start_record(int device_count, const std::string& root = {},
                                             const std::optional<std::vector<std::string>>& gpus = std::nullopt);

}  // namespace ortfleet
