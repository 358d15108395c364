// SPDX-License-Identifier: Apache-2.0
// Step 2 helpers: what a binary needs of the CUDA runtime, read from its dynamic section.
#include <archguard/doctor.hpp>

#include <archguard/container.hpp>
#include <archguard/elf.hpp>

#include <charconv>

namespace archguard::doctor {

Result<RuntimeNeed> runtime_need(const std::string& path) {
  RuntimeNeed need;
  need.path = path;
  AG_TRY(auto file, map_file(path));
  const Bytes bytes = file->bytes();
  if (!looks_like_elf(bytes)) return need;
  AG_TRY(auto elf, ElfFile::parse(bytes, path));
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

}  // namespace archguard::doctor
