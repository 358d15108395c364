// SPDX-License-Identifier: Apache-2.0
#pragma once
// The deflated members of a zip that its central directory describes fully and its local
// headers repeat exactly, found by where their deflated data starts: container.cpp inflates
// those in one pass (libdeflate) from the zip's bytes instead of through libarchive, which
// still walks the zip, names the members and reads everything else. Anything unusual is left
// out and read by libarchive as before: zip64 sizes or offsets, a zip split over disks,
// encryption, a data descriptor, a method other than deflate, a local header that disagrees
// with the central directory, data running into the central directory.
// Why a reader of its own: libarchive exposes neither a member's deflated size nor where its
// data lies (archive_entry has the inflated size only; archive_read_header_position is where
// the previous member ended, not the local header the seekable zip reader seeks to). What it
// does give is archive_filter_bytes(a, 0) after archive_read_next_header: the offset of the
// member's first data byte, which `at` looks up here.
#include <archguard/bytes.hpp>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace archguard::detail {

/// One deflated member, its values as the central directory and the local header both say.
struct ZipMember {
  std::uint64_t header = 0;      ///< offset of the local header in the zip
  std::uint64_t data = 0;        ///< offset of the deflated data (after the local header)
  std::uint64_t compressed = 0;  ///< bytes of deflated data
  std::uint64_t size = 0;        ///< bytes once inflated
  std::uint32_t crc = 0;         ///< CRC-32 of the inflated bytes
  std::string_view name;         ///< the name's bytes, in the zip's bytes
};

class ZipDirectory {
 public:
  /// The central directory of `zip` (the bytes of a whole zip: a file, a member), read through
  /// ByteReader; a directory without members when there is no end record this reader takes
  /// (none, zip64, several disks, the directory not right before the end record).
  static ZipDirectory read(Bytes zip);

  /// The member whose deflated data starts at `data` (where libarchive stands after reading its
  /// local header), once its local header is checked against the central directory.
  std::optional<ZipMember> at(std::uint64_t data) const;

  /// The deflated members the central directory describes fully (local headers not checked).
  std::size_t size() const { return members_.size(); }

 private:
  Bytes zip_;
  std::uint64_t end_ = 0;           ///< where the central directory starts: member data ends before it
  std::vector<ZipMember> members_;  ///< by local header offset
};

}  // namespace archguard::detail
