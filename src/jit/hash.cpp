// SPDX-License-Identifier: Apache-2.0
// SHA-256 through OpenSSL EVP, and the cache record's byte format.
#include <archguard/bytes.hpp>
#include <archguard/cache.hpp>

#include "common/endian.hpp"

#include <openssl/evp.h>

#include <cstdio>
#include <cstring>
#include <limits>

namespace archguard::jit {

std::string to_hex(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(64, '0');
  for (std::size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = kHex[d[i] >> 4];
    s[2 * i + 1] = kHex[d[i] & 0xf];
  }
  return s;
}

std::optional<Digest> digest_from_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Digest d{};
  for (std::size_t i = 0; i < d.size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return d;
}

Hasher::Hasher() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

Hasher::~Hasher() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Hasher::add(std::span<const std::byte> bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size());
}

void Hasher::add(std::string_view text) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), text.data(), text.size());
}

void Hasher::add_field(std::string_view tag, std::string_view value) {
  add(tag);
  const std::string len = ":" + std::to_string(value.size()) + ":";
  add(len);
  add(value);
}

Digest Hasher::finish() {
  Digest d{};
  unsigned n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), d.data(), &n);
  return d;
}

Digest sha256(std::span<const std::byte> bytes) {
  Hasher h;
  h.add(bytes);
  return h.finish();
}

Digest sha256(std::string_view text) {
  Hasher h;
  h.add(text);
  return h.finish();
}

// ---- record format: little-endian u32 kind, u32 name count, (u32 len, bytes) x 2 per name,
// u64 image length, image bytes. Nothing may follow.

namespace {

void put_str(std::vector<std::byte>& out, const std::string& s) {
  common::append_le(out, s.size(), 4);
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}

// Reads the record front to back through the checked reader; a short record is reported with
// the field, its offset, what it needs and what is left.
class Cursor {
 public:
  Cursor(std::span<const std::byte> b, std::string_view what) : r_(b, std::string(what)), what_(what) {}
  std::uint64_t offset() const { return off_; }
  std::uint64_t left() const { return r_.size() - off_; }
  Result<std::uint64_t> uint(unsigned bytes, std::string_view field) {
    if (!r_.contains(off_, bytes)) return short_read(field, bytes);
    const std::uint64_t at = off_;
    off_ += bytes;
    if (bytes == 4) return std::uint64_t{r_.u32(at, field).value()};
    return r_.u64(at, field).value();
  }
  Result<std::span<const std::byte>> take(std::uint64_t n, std::string_view field) {
    auto s = r_.span(off_, n, field);
    if (!s) return short_read(field, n);
    off_ += n;
    return *s;
  }

 private:
  Error short_read(std::string_view field, std::uint64_t need) const {
    char buf[160];
    std::snprintf(buf, sizeof buf, ": %.*s at 0x%llx needs 0x%llx bytes but only 0x%llx remain",
                  static_cast<int>(field.size()), field.data(), static_cast<unsigned long long>(off_),  // NOLINT(runtime/int)
                  static_cast<unsigned long long>(need), static_cast<unsigned long long>(left()));      // NOLINT(runtime/int)
    return make_error(ErrorKind::corrupt, std::string(what_) + buf);
  }
  ByteReader r_;
  std::string_view what_;
  std::uint64_t off_ = 0;
};

}  // namespace

std::vector<std::byte> encode_record(const CacheRecord& r) {
  std::vector<std::byte> out;
  out.reserve(16 + r.image.size());
  common::append_le(out, r.kind, 4);
  common::append_le(out, r.names.size(), 4);
  for (const auto& [expr, lowered] : r.names) {
    put_str(out, expr);
    put_str(out, lowered);
  }
  common::append_le(out, r.image.size(), 8);
  out.insert(out.end(), r.image.begin(), r.image.end());
  return out;
}

Result<CacheRecord> decode_record(std::span<const std::byte> bytes, std::string_view what) {
  Cursor c(bytes, what);
  CacheRecord r;
  AG_TRY(auto kind, c.uint(4, "kind"));
  r.kind = static_cast<std::uint32_t>(kind);
  AG_TRY(auto n, c.uint(4, "name count"));
  // Each name pair takes at least its two 4-byte lengths.
  if (auto need = checked_mul(n, 8); !need || *need > c.left()) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": name count 0x%llx exceeds what the record can hold",
                  static_cast<unsigned long long>(n));  // NOLINT(runtime/int)
    return make_error(ErrorKind::corrupt, std::string(what) + buf);
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string pair[2];
    for (auto& s : pair) {
      AG_TRY(auto len, c.uint(4, "name length"));
      AG_TRY(auto body, c.take(len, "name"));
      s.assign(reinterpret_cast<const char*>(body.data()), body.size());
    }
    r.names.emplace_back(std::move(pair[0]), std::move(pair[1]));
  }
  AG_TRY(auto img_len, c.uint(8, "image length"));
  AG_TRY(auto img, c.take(img_len, "image"));
  r.image.assign(img.begin(), img.end());
  if (c.left() != 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": 0x%llx unexpected bytes after the image at 0x%llx",
                  static_cast<unsigned long long>(c.left()), static_cast<unsigned long long>(c.offset()));  // NOLINT(runtime/int)
    return make_error(ErrorKind::corrupt, std::string(what) + buf);
  }
  return r;
}

}  // namespace archguard::jit
