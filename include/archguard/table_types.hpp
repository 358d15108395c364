// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// Row types of the architecture table. The rows themselves are generated at build time from
/// cmake/Modules/CudaArchGuard/architectures.txt (see CudaArchGuardTable.cmake); use the
/// queries in <archguard/arch.hpp> rather than the raw rows.

#include <compare>

namespace archguard {

/// A MAJOR.MINOR pair: a CUDA release, a compute capability or a PTX ISA version.
/// {0, 0} means "none".
struct Version2 {
  unsigned major = 0;
  unsigned minor = 0;
  constexpr bool empty() const { return major == 0 && minor == 0; }
  constexpr unsigned packed() const { return major * 10 + minor; }  // 9.0 -> 90, 12.1 -> 121
  friend constexpr bool operator==(Version2, Version2) = default;
  friend constexpr auto operator<=>(Version2 a, Version2 b) {
    return a.major != b.major ? a.major <=> b.major : a.minor <=> b.minor;
  }
};

struct ArchRow {
  unsigned sm;  ///< 90 for sm_90
  Version2 cc;  ///< compute capability
  const char* codename;
  const char* products;  ///< comma separated, may be empty
  bool tegra;            ///< excluded from SASS minor-version compatibility
  Version2 a_since;      ///< first CUDA with the 'a' variant; empty: none
  Version2 f_since;      ///< first CUDA with the 'f' variant; empty: none
  Version2 first_cuda;   ///< first CUDA release targeting it
  Version2 removed_in;   ///< first CUDA release no longer targeting it; empty: supported
  unsigned family;       ///< 'f' family id (SM of the family head); 0: none
};

struct RenameRow {
  unsigned old_sm;
  unsigned new_sm;
  Version2 cuda;  ///< release that renamed it
};

/// More names of the GPUs of one SM (the table's `gpu` rows), for names schedulers and node labels use.
struct GpuNameRow {
  unsigned sm;        ///< 0 ends the list
  const char* names;  ///< comma separated
};

struct ReleaseRow {
  Version2 cuda;
  Version2 ptx_isa;
  const char* min_driver;  ///< minimum Linux driver, "" when not recorded
};

}  // namespace archguard
