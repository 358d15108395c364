// SPDX-License-Identifier: Apache-2.0
// Payloads on demand: bounded decompression and kernel entry points.
#include <archguard/fatbin.hpp>

#include "try.hpp"

#include <cxxabi.h>
#ifndef ARCHGUARD_NO_COMPRESSION  // the dependency-free verifier (tools/archguard-verify) decodes no payload
#include <lz4.h>
#include <zstd.h>
#endif

#include <climits>
#include <cstdlib>
#include <memory>

namespace archguard {
namespace {

constexpr std::uint8_t kSttFunc = 2;
constexpr std::uint8_t kStoCudaEntry = 0x10;

std::string entry_where(std::string_view name, const FatbinEntry& e) {
  return std::string(name) + ": entry " + std::to_string(e.index) + " at " + hex(e.offset);
}

bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c == '.';
}

}  // namespace

std::string demangle(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  std::string z(name);
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !out) return z;
  return out.get();
}

Result<std::vector<std::byte>> decompress(const FatbinEntry& e, std::string_view name, std::uint64_t limit) {
  const std::string where = entry_where(name, e);
  if (e.compression == Compression::none) {
    if (e.stored_size > limit)
      return Error{where + ": image size " + hex(e.stored_size) + " exceeds the limit " + hex(limit)};
    return std::vector<std::byte>(e.payload.begin(), e.payload.end());
  }
  if (e.uncompressed_size > limit)
    return Error{where + ": claimed uncompressed size " + hex(e.uncompressed_size) + " exceeds the limit " + hex(limit)};
#ifdef ARCHGUARD_NO_COMPRESSION
  return Error{where + ": " + std::string(to_string(e.compression)) + " payload not decoded (built without compression libraries)"};
#else
  const std::size_t out_size = static_cast<std::size_t>(e.uncompressed_size);
  std::vector<std::byte> out(out_size);
  if (e.compression == Compression::lz4) {
    const std::uint64_t in_size = e.compressed_size != 0 ? e.compressed_size : e.stored_size;
    if (in_size > INT_MAX || out_size > INT_MAX)
      return Error{where + ": lz4 sizes " + hex(in_size) + " / " + hex(out_size) + " exceed what lz4 handles"};
    const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(e.payload.data()),  // bytes as chars
                                      reinterpret_cast<char*>(out.data()), static_cast<int>(in_size),
                                      static_cast<int>(out_size));
    if (n < 0) return Error{where + ": lz4 payload of " + hex(in_size) + " bytes is corrupt"};
    if (static_cast<std::size_t>(n) != out_size)
      return Error{where + ": lz4 payload decompresses to " + hex(static_cast<std::uint64_t>(n)) +
                   " bytes, the header claims " + hex(out_size)};
    return out;
  }
  std::size_t in_size = e.compressed_size;
  if (in_size == 0) {
    in_size = ZSTD_findFrameCompressedSize(e.payload.data(), e.payload.size());
    if (ZSTD_isError(in_size) != 0)
      return Error{where + ": zstd payload is corrupt (" + ZSTD_getErrorName(in_size) + ")"};
  }
  const unsigned long long content = ZSTD_getFrameContentSize(e.payload.data(), in_size);
  if (content == ZSTD_CONTENTSIZE_ERROR) return Error{where + ": payload is not a zstd frame"};
  if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != e.uncompressed_size)
    return Error{where + ": zstd frame holds " + hex(content) + " bytes, the header claims " + hex(e.uncompressed_size)};
  const std::size_t n = ZSTD_decompress(out.data(), out.size(), e.payload.data(), in_size);
  if (ZSTD_isError(n) != 0)
    return Error{where + ": zstd payload is corrupt (" + ZSTD_getErrorName(n) + ")"};
  if (n != out_size)
    return Error{where + ": zstd payload decompresses to " + hex(n) + " bytes, the header claims " + hex(out_size)};
  return out;
#endif
}

Result<std::vector<Kernel>> list_kernels(const FatbinEntry& e, Bytes image, std::string_view name) {
  std::vector<Kernel> out;
  if (e.kind == CodeKind::ltoir) return out;
  if (e.kind == CodeKind::sass) {
    AG_TRY(ElfFile cubin, ElfFile::parse(image, entry_where(name, e) + ": cubin"));
    AG_TRY(std::vector<ElfSymbol> syms, cubin.symbols());
    for (const auto& s : syms) {
      if (s.type() != kSttFunc || (s.other & kStoCudaEntry) == 0 || s.name.empty()) continue;
      out.push_back(Kernel{std::string(s.name), demangle(s.name)});
    }
    return out;
  }
  // PTX: lines "[.visible|.weak|.extern] .entry <name>[(...]", comments removed.
  std::string_view text(reinterpret_cast<const char*>(image.data()), image.size());  // bytes as chars
  if (auto nul = text.find('\0'); nul != std::string_view::npos) text = text.substr(0, nul);
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (auto c = line.find("//"); c != std::string_view::npos) line = line.substr(0, c);
    auto next_token = [&line]() {
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t' || line.front() == '\r')) line.remove_prefix(1);
      std::size_t n = 0;
      while (n < line.size() && line[n] != ' ' && line[n] != '\t' && line[n] != '\r' && line[n] != '(') ++n;
      std::string_view t = line.substr(0, n);
      line.remove_prefix(n);
      return t;
    };
    std::string_view t = next_token();
    while (t == ".visible" || t == ".weak" || t == ".extern") t = next_token();
    if (t != ".entry") continue;
    std::string_view n = next_token();
    std::size_t len = 0;
    while (len < n.size() && is_ident(n[len])) ++len;
    if (len == 0) continue;
    n = n.substr(0, len);
    out.push_back(Kernel{std::string(n), demangle(n)});
  }
  return out;
}

}  // namespace archguard
