#pragma once
// What another process holds in host memory, as the kernel counts it (/proc/PID/smaps_rollup): its
// resident set, and its proportional share (PSS), which counts a page mapped by n processes as 1/n
// of a page in each. Summing RSS over a pool's workers counts the libraries they all map (cuDNN,
// cuBLAS, ONNX Runtime) once per worker; summing PSS counts them once in all.
#include <cstdint>

namespace ortfleet::detail {

struct ProcessMemory {
  bool known = false;          ///< false: the process is gone, or its memory is not ours to read
  uint64_t rss_bytes = 0;      ///< resident set
  uint64_t pss_bytes = 0;      ///< proportional set size: the process's fair share of what it maps
  uint64_t anonymous_pss_bytes = 0;  ///< of which heap, stacks and other memory no file backs (a parked worker's GPU image lands here)
  uint64_t file_pss_bytes = 0;       ///< of which pages of files (libraries, mapped models)
};

/// `pid`'s host memory. Reads smaps_rollup (Linux 4.14+), else the resident set from /proc/PID/status
/// (PSS then unknown: equal to RSS).
ProcessMemory process_memory(int pid);

}  // namespace ortfleet::detail
