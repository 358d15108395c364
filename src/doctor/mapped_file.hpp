// SPDX-License-Identifier: Apache-2.0
#pragma once
// A read-only memory mapping of a whole file (nothing is read until touched), for the
// doctor's ELF readers. Internal to src/doctor.

#include <archguard/result.hpp>

#include <cstddef>
#include <span>
#include <string>

namespace archguard::doctor::detail {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace archguard::doctor::detail
