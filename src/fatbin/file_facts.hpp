// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a scan read from one file, kept in a FactsStore (FactsStore::keep_file) so that the
// next scan of the same, unchanged file neither parses its headers nor searches it: the
// objects with every header field of their fatbins and entries, and the payloads as offsets
// into the file's bytes. Only a file whose objects' payloads all lie in its own bytes (an ELF
// file, a cubin, a fatbin file) and that gave no error is kept; an archive (a static library, a
// wheel, a tarball) only when it holds no device code (the payloads of its members are inflated
// or copied elsewhere): its host objects and notes then come back without reading it, and
// without charging the inflate budgets (what they guard against was read once already).
#include <archguard/container.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace archguard::detail {

/// The key of a file's facts: its identity (ObjectFatbins::identity) and what of `options`
/// changes what a scan reads from it (the embedded search, the derived limits, the archive
/// depth, member size and inflate budgets), and whether the user named it (a file named directly is listed without device code).
std::string file_facts_key(const std::string& identity, const ScanOptions& options, bool named_directly);

/// Encodes the objects report.objects[objects_begin...] and the notes
/// report.skipped[skipped_begin...] read from the file at `path` whose bytes are `whole`; nothing
/// when they cannot be kept: a payload outside `whole`, a display path not under `path`, an
/// object from inside an archive.
std::optional<std::vector<std::byte>> encode_file_facts(const ScanReport& report, std::size_t objects_begin,
                                                        std::size_t skipped_begin, Bytes whole, const std::string& path);

/// Appends to `report` the objects and notes of a record that encode_file_facts wrote for a file
/// with the same key, now at `path` with bytes `whole` (the payloads point into it). False, with
/// `report` unchanged, when the record is damaged or does not fit `whole`.
bool decode_file_facts(Bytes record, Bytes whole, const std::string& path, ScanReport& report);

/// Small values of the files of a directory walk, by a digest (128 bits) of each file's
/// identity (device, inode, size, modification and change times: any write moves the change
/// time), kept in a FactsStore as a tree record (FactsStore::keep_tree) so that the next walk of
/// the same directory need not open them again while they keep that identity. scan_path keeps
/// the files found to hold no device code (not an ELF file, archive, cubin, PTX or fatbin file
/// by their first bytes), with 1 when their bytes counted as read (a file of 0 bytes does not);
/// doctor's step 2 keeps what it read of each library (whether it is an ELF file, holds device
/// code, which libcudart it needs).
class StampedValues {
 public:
  struct Digest {
    std::uint64_t hi = 0, lo = 0;
    friend auto operator<=>(const Digest&, const Digest&) = default;
  };
  /// A few nanoseconds: computed once per file, by the thread that stat'ed it.
  static Digest digest(const FileStamp& stamp);

  void add(Digest d, std::uint32_t value);
  /// Sorts what was added (a digest added twice keeps its first value); call before find(),
  /// encode() and comparing.
  void finish();
  std::optional<std::uint32_t> find(Digest d) const;
  std::size_t size() const { return entries_.size(); }
  std::vector<std::byte> encode() const;
  /// Nothing when the record is damaged (cut short, out of order) or of another format.
  static std::optional<StampedValues> decode(Bytes record);
  friend bool operator==(const StampedValues&, const StampedValues&) = default;

 private:
  struct Entry {
    Digest digest;
    std::uint32_t value = 0;
    friend auto operator<=>(const Entry&, const Entry&) = default;
  };
  std::vector<Entry> entries_;
};

/// The key of a directory's StampedValues: the path as named and as resolved.
std::string tree_key(const std::string& path);

}  // namespace archguard::detail
