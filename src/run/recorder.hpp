// SPDX-License-Identifier: Apache-2.0
#pragma once
// The in-process recorder of `archguard run` (internal): a CUPTI subscriber that writes one
// line of JSON per event to <dir>/p<pid>.events. It is compiled into the injection library
// (libarchguard_inject.so, loaded by the CUDA driver through CUDA_INJECTION64_PATH) and into
// the archguard_run library (the in-process API, archguard/run.hpp).
//
// Rules it keeps, because it lives inside somebody else's program (docs/run.md):
//   - nothing is thrown across its entry points, nothing is printed: output goes to the event
//     file only;
//   - no locks of the dynamic loader are taken in callbacks (no dladdr, no dl_iterate_phdr):
//     pointers are placed with /proc/self/maps, memory is read with process_vm_readv, so a bad
//     pointer is an error, never a fault;
//   - memory is bounded: fixed tables, a byte budget for copies of images held in memory;
//   - CUPTI is loaded with dlopen: missing, too old or taken by another tool, the program runs
//     on and the event file says why nothing was recorded.

#include <cstddef>
#include <cstdint>

namespace archguard::run::detail {

struct RecorderConfig {
  const char* dir = nullptr;                                ///< where p<pid>.events and the image copies go (must exist)
  const char* cupti = nullptr;                              ///< libcupti to dlopen first; null: the usual names
  bool predict = false;                                     ///< also record every launched kernel and copy loaded images
  std::uint64_t max_copy_bytes = std::uint64_t{256} << 20;  ///< per process, for images from memory
  const char* origin = "injection";                         ///< how the recorder was started ("injection", "api")
  bool runtime_launches = true;                             ///< watch cudaLaunchKernel & co (the usual failing call)
  bool driver_launches = true;                              ///< watch cuLaunchKernel & co
  bool empty_callback = false;                              ///< measurement only: subscribe, then do nothing in callbacks
};

/// Starts recording in this process. Never throws; false when nothing will be recorded (the
/// reason is written to `why` and, when the event file could be opened, to it).
bool start(const RecorderConfig& config, char* why, std::size_t why_size) noexcept;

/// Writes the closing events (counts, launched kernels) and unsubscribes. Idempotent.
void stop() noexcept;

/// The event file of this process ("" before start).
const char* event_file() noexcept;

}  // namespace archguard::run::detail
