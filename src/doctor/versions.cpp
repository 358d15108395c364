// SPDX-License-Identifier: Apache-2.0
// Step 2 helpers: what a binary needs of the CUDA runtime, read from its dynamic section.
#include <archguard/doctor.hpp>

#include "doctor/elf_dynamic.hpp"
#include "doctor/mapped_file.hpp"

#include <charconv>

namespace archguard::doctor {

Result<RuntimeNeed> runtime_need(const std::string& path) {
  RuntimeNeed need;
  need.path = path;
  auto file = detail::MappedFile::open(path);
  if (!file) return file.error();
  if (!detail::is_elf(file->bytes())) return need;
  auto headers = detail::parse_elf_headers(file->bytes(), path);
  if (!headers) return headers.error();
  need.elf = true;
  need.needed = headers->needed;
  need.has_device_code = headers->find(".nv_fatbin") != nullptr || headers->find("__nv_relfatbin") != nullptr;
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
