// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// The one bounds-checked reader every parser of untrusted bytes goes through. Offsets are
/// 64-bit, every addition is overflow-checked, and every read either succeeds completely or
/// returns an error naming the source, the offset and the size asked for. Multi-byte values are
/// little endian (all formats read here are).

#include <archguard/result.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace archguard {

/// Bytes of a file, an archive member or a memory region; never owned by the reader.
using Bytes = std::span<const std::byte>;

/// "0x1a40".
std::string hex(std::uint64_t value);

/// The system's page size (sysconf, read once): what releases of mapped or decoded bytes round to.
std::size_t page_size();

/// Copies `n` bytes from `src`, which may lie in a file mapping, to `dst`; false when the
/// mapping's pages vanished under the copy (the file was truncated by someone else: SIGBUS).
/// The fault is caught for this thread only; any other SIGBUS keeps its default effect.
bool copy_guarded(void* dst, const void* src, std::size_t n);

/// Guards a read-only file mapping [begin, begin + size) against truncation: when another
/// process shrinks the file, reading a page past its new end raises SIGBUS, which would kill
/// the process wherever a header or a search touches it. While registered, such a fault maps a
/// page of zeros over the lost page instead, and the mapping is marked damaged: the read goes
/// on (finding garbage or zeros) and the owner turns the mark into an error. Returns a slot for
/// mapping_damaged and unguard_mapping, or -1 when every slot is taken (the mapping is then
/// unguarded; copy_guarded still protects payload copies).
int guard_mapping(const void* begin, std::size_t size);
/// Whether a fault was repaired in the guarded mapping `slot` (see guard_mapping).
bool mapping_damaged(int slot);
/// Ends the guard of `slot`; call before unmapping.
void unguard_mapping(int slot);

/// a + b, or nothing when the sum overflows 64 bits.
constexpr std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  if (a > UINT64_MAX - b) return std::nullopt;
  return a + b;
}

/// a * b, or nothing when the product overflows 64 bits (a count of records times their size).
constexpr std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return std::nullopt;
  return a * b;
}

/// A size as users write it in flags and the environment: decimal digits, optionally followed
/// by K, M, G or T (or KiB, MiB, GiB, TiB; powers of 1024). Nothing when the text is not such a
/// size or the value does not fit in 64 bits (17179869184G is refused, not wrapped to 0).
inline std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  std::uint64_t v = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  const std::string_view suffix = text.substr(i);
  unsigned shift = 0;
  if (suffix.empty()) shift = 0;
  else if (suffix == "K" || suffix == "KiB") shift = 10;
  else if (suffix == "M" || suffix == "MiB") shift = 20;
  else if (suffix == "G" || suffix == "GiB") shift = 30;
  else if (suffix == "T" || suffix == "TiB") shift = 40;
  else return std::nullopt;
  if (shift != 0 && v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

/// A bounds-checked little-endian view of `bytes`. `name` and `base` only shape messages:
/// offsets in errors are written as base + offset, so a reader over one section reports
/// offsets in the whole file.
class ByteReader {
 public:
  ByteReader(Bytes bytes, std::string name, std::uint64_t base = 0)
      : bytes_(bytes), name_(std::move(name)), base_(base) {}

  std::uint64_t size() const { return bytes_.size(); }
  Bytes bytes() const { return bytes_; }
  std::string_view name() const { return name_; }
  std::uint64_t base() const { return base_; }

  /// Whether [offset, offset + length) lies inside the bytes (no overflow).
  bool contains(std::uint64_t offset, std::uint64_t length) const {
    auto end = checked_add(offset, length);
    return end.has_value() && *end <= bytes_.size();
  }

  /// The sub-span [offset, offset + length), or an error saying what `what` ran past.
  Result<Bytes> span(std::uint64_t offset, std::uint64_t length, std::string_view what) const {
    if (!contains(offset, length)) return error_past(offset, length, what);
    return bytes_.subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(length));
  }

  /// A reader over [offset, offset + length) whose messages keep the absolute offsets.
  Result<ByteReader> sub(std::uint64_t offset, std::uint64_t length, std::string_view what) const {
    auto s = span(offset, length, what);
    if (!s) return s.error();
    return ByteReader(*s, name_, base_ + offset);
  }

  template <class T>
  Result<T> read(std::uint64_t offset, std::string_view what) const {
    static_assert(std::is_unsigned_v<T> || std::is_same_v<T, std::int64_t> ||
                  std::is_same_v<T, std::int32_t>);
    if (!contains(offset, sizeof(T))) return error_past(offset, sizeof(T), what);
    T value{};
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));  // host is little endian (checked below)
    return value;
  }
  Result<std::uint8_t> u8(std::uint64_t off, std::string_view what) const { return read<std::uint8_t>(off, what); }
  Result<std::uint16_t> u16(std::uint64_t off, std::string_view what) const { return read<std::uint16_t>(off, what); }
  Result<std::uint32_t> u32(std::uint64_t off, std::string_view what) const { return read<std::uint32_t>(off, what); }
  Result<std::uint64_t> u64(std::uint64_t off, std::string_view what) const { return read<std::uint64_t>(off, what); }

  /// A NUL-terminated string starting at `offset` and ending before `limit` (exclusive).
  Result<std::string_view> cstring(std::uint64_t offset, std::string_view what,
                                   std::uint64_t limit = UINT64_MAX) const;

  /// "<name>: <what> at 0x..: <detail>".
  Error error_at(std::uint64_t offset, std::string_view what, std::string_view detail) const;

 private:
  Error error_past(std::uint64_t offset, std::uint64_t length, std::string_view what) const;

  Bytes bytes_;
  std::string name_;
  std::uint64_t base_;
};

/// The longest name read from a string table (a section, symbol or DT_NEEDED name): 1 MiB. The
/// longest kernel name in NVIDIA's libraries is a few KiB; a longer name is an error naming the
/// table, the offset and the limit, never an allocation (see docs/cli.md, "limits").
inline constexpr std::uint64_t kMaxNameLength = std::uint64_t{1} << 20;

/// The NUL-terminated strings of one string table (.shstrtab, .strtab, .dynstr), read as views
/// into its bytes. Any number of look-ups cost one pass over the table in all: what a look-up
/// scanned is remembered, so that 20,000 headers naming one 1 MiB string, or naming every
/// offset of it, do not scan it 20,000 times. A string longer than `max_length` is an error.
class StringTable {
 public:
  explicit StringTable(ByteReader reader, std::uint64_t max_length = kMaxNameLength)
      : reader_(std::move(reader)), max_length_(max_length) {}
  /// The string at `offset`; `what` names it in messages ("section name").
  Result<std::string_view> at(std::uint64_t offset, std::string_view what);

 private:
  ByteReader reader_;
  std::uint64_t max_length_;
  /// Scanned runs: start -> the offset of the first NUL at or after every offset in
  /// [start, that NUL]. Runs never overlap.
  std::map<std::uint64_t, std::uint64_t> runs_;
};

static_assert(std::endian::native == std::endian::little,
              "the readers assume a little-endian host (x86-64, aarch64)");

}  // namespace archguard
