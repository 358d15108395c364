// SPDX-License-Identifier: Apache-2.0
// Step 2 helpers: what a binary needs of the CUDA runtime, read from its dynamic section.
#include <archguard/doctor.hpp>

#include "doctor/elf_input.hpp"

#include <charconv>

namespace archguard::doctor {

namespace {

/// What the ELF file `elf` needs of the CUDA runtime.
Result<RuntimeNeed> need_of(const ElfFile& elf, RuntimeNeed need) {
  AG_TRY(auto needed, elf.needed());
  need.elf = true;
  need.needed = std::move(needed);
  need.has_device_code = elf.find(".nv_fatbin") != nullptr || elf.find("__nv_relfatbin") != nullptr;
  for (const std::string& lib : need.needed) {
    constexpr std::string_view prefix = "libcudart.so.";
    if (lib.rfind(prefix, 0) == 0) {
      std::string_view rest = std::string_view(lib).substr(prefix.size());
      unsigned major = 0;
      auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), major);
      if (ec == std::errc() && major > 0) need.cudart_major = major;
    }
    if (lib == "libcuda.so.1") need.needs_libcuda = true;
  }
  return need;
}

}  // namespace

Result<RuntimeNeed> runtime_need(const std::string& path) {
  return detail::read_if_elf<RuntimeNeed>(path, need_of);
}

}  // namespace archguard::doctor
