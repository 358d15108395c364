// SPDX-License-Identifier: Apache-2.0
#include "fatbin/zip_directory.hpp"

#include <algorithm>

namespace archguard::detail {
namespace {

constexpr std::uint32_t kLocalHeader = 0x04034b50;    // "PK\3\4"
constexpr std::uint32_t kCentralHeader = 0x02014b50;  // "PK\1\2"
constexpr std::uint32_t kEndRecord = 0x06054b50;      // "PK\5\6"
constexpr std::uint64_t kEndRecordSize = 22;
constexpr std::uint64_t kCentralHeaderSize = 46;
constexpr std::uint64_t kLocalHeaderSize = 30;
constexpr std::uint16_t kDeflate = 8;
// General-purpose flags that leave a member to libarchive: encrypted, sizes in a data
// descriptor after the data, strong encryption, a masked local header.
constexpr std::uint16_t kUnusualFlags = 0x0001 | 0x0008 | 0x0040 | 0x2000;
constexpr std::uint32_t kZip64 = 0xffffffff;

}  // namespace

ZipDirectory ZipDirectory::read(Bytes zip) {
  ZipDirectory d;
  d.zip_ = zip;
  const ByteReader r(zip, "zip");
  if (zip.size() < kEndRecordSize) return d;
  // The end record: the last "PK\5\6" whose comment ends exactly where the bytes end.
  const std::uint64_t last = zip.size() - kEndRecordSize;
  const std::uint64_t lowest = last > 0xffff ? last - 0xffff : 0;
  std::optional<std::uint64_t> end;
  for (std::uint64_t at = last + 1; at-- > lowest;) {
    auto sig = r.u32(at, "end record");
    auto comment = r.u16(at + 20, "end record comment length");
    if (sig && comment && *sig == kEndRecord && at + kEndRecordSize + *comment == zip.size()) {
      end = at;
      break;
    }
  }
  if (!end) return d;
  auto disk = r.u16(*end + 4, "disk number");
  auto cd_disk = r.u16(*end + 6, "central directory disk");
  auto here = r.u16(*end + 8, "entries on this disk");
  auto entries = r.u16(*end + 10, "entries");
  auto cd_size = r.u32(*end + 12, "central directory size");
  auto cd_offset = r.u32(*end + 16, "central directory offset");
  if (!disk || !cd_disk || !here || !entries || !cd_size || !cd_offset) return d;
  if (*disk != 0 || *cd_disk != 0 || *here != *entries || *entries == 0xffff || *cd_size == kZip64 || *cd_offset == kZip64)
    return d;
  // Nothing between the directory and the end record (a zip64 locator would be): nor bytes
  // before the zip that shift its offsets (a self-extracting archive).
  if (std::uint64_t{*cd_offset} + *cd_size != *end) return d;
  std::vector<ZipMember> members;
  std::uint64_t at = *cd_offset;
  for (unsigned i = 0; i < *entries; ++i) {
    auto sig = r.u32(at, "central directory header");
    auto flags = r.u16(at + 8, "flags");
    auto method = r.u16(at + 10, "method");
    auto crc = r.u32(at + 16, "crc-32");
    auto compressed = r.u32(at + 20, "compressed size");
    auto size = r.u32(at + 24, "size");
    auto name_length = r.u16(at + 28, "name length");
    auto extra_length = r.u16(at + 30, "extra field length");
    auto comment_length = r.u16(at + 32, "comment length");
    auto start_disk = r.u16(at + 34, "disk number start");
    auto header = r.u32(at + 42, "local header offset");
    if (!sig || !flags || !method || !crc || !compressed || !size || !name_length || !extra_length || !comment_length ||
        !start_disk || !header || *sig != kCentralHeader)
      return d;  // a damaged directory: libarchive reads all of it
    auto name = r.span(at + kCentralHeaderSize, *name_length, "name");
    if (!name) return d;
    const std::uint64_t next = at + kCentralHeaderSize + *name_length + *extra_length + *comment_length;
    if (next > *end) return d;
    if (*method == kDeflate && (*flags & kUnusualFlags) == 0 && *start_disk == 0 && *compressed != kZip64 && *size != kZip64 &&
        *header != kZip64) {
      ZipMember m;
      m.header = *header;
      m.compressed = *compressed;
      m.size = *size;
      m.crc = *crc;
      m.name = std::string_view(reinterpret_cast<const char*>(name->data()), name->size());  // name bytes as text
      members.push_back(m);
    }
    at = next;
  }
  std::stable_sort(members.begin(), members.end(), [](const ZipMember& a, const ZipMember& b) { return a.header < b.header; });
  d.end_ = *cd_offset;
  d.members_ = std::move(members);
  return d;
}

std::optional<ZipMember> ZipDirectory::at(std::uint64_t data) const {
  // The member whose local header is the last one before `data`.
  auto it = std::upper_bound(members_.begin(), members_.end(), data, [](std::uint64_t o, const ZipMember& m) { return o < m.header; });
  if (it == members_.begin()) return std::nullopt;
  ZipMember m = *std::prev(it);
  const ByteReader r(zip_, "zip");
  auto sig = r.u32(m.header, "local header");
  auto flags = r.u16(m.header + 6, "flags");
  auto method = r.u16(m.header + 8, "method");
  auto crc = r.u32(m.header + 14, "crc-32");
  auto compressed = r.u32(m.header + 18, "compressed size");
  auto size = r.u32(m.header + 22, "size");
  auto name_length = r.u16(m.header + 26, "name length");
  auto extra_length = r.u16(m.header + 28, "extra field length");
  if (!sig || !flags || !method || !crc || !compressed || !size || !name_length || !extra_length) return std::nullopt;
  if (*sig != kLocalHeader || (*flags & kUnusualFlags) != 0 || *method != kDeflate || *crc != m.crc || *compressed != m.compressed ||
      *size != m.size || *name_length != m.name.size())
    return std::nullopt;
  auto name = r.span(m.header + kLocalHeaderSize, *name_length, "name");
  if (!name || std::string_view(reinterpret_cast<const char*>(name->data()), name->size()) != m.name) return std::nullopt;
  m.data = m.header + kLocalHeaderSize + *name_length + *extra_length;
  if (m.data != data || m.data + m.compressed > end_) return std::nullopt;
  return m;
}

}  // namespace archguard::detail
