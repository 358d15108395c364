// SPDX-License-Identifier: Apache-2.0
// Files that are device code by themselves: cubins, PTX text, LTO-IR. Each becomes a fatbin of
// one synthetic entry so that kernels and coverage are read from it as from any fatbin.
#include <archguard/fatbin.hpp>

#include <algorithm>
#include <cctype>

namespace archguard {
namespace {

constexpr std::uint32_t kLtoIrMagic = 0x7f4e43ed;  // bytes ed 43 4e 7f
constexpr std::uint64_t kLtoIrHeaderSize = 0x1c;
constexpr std::uint64_t kPtxProbe = 4096;  // the directives come first, after comments
// The reader needs nothing from the architecture table (the fuzz build compiles it alone): SM
// numbers are checked for plausibility only, as the fatbin entry parser does; the table judges.
constexpr unsigned kMinSm = 10, kMaxSm = 255;

bool plausible_sm(unsigned sm) { return sm >= kMinSm && sm <= kMaxSm; }

/// The text before the first NUL of the first kPtxProbe bytes, or nothing when it holds a
/// control byte no PTX file has.
std::optional<std::string_view> text_head(Bytes bytes) {
  const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(bytes.size(), kPtxProbe));
  std::string_view t(reinterpret_cast<const char*>(bytes.data()), n);  // bytes viewed as text
  for (std::size_t i = 0; i < t.size(); ++i) {
    const auto c = static_cast<unsigned char>(t[i]);
    if (c == 0) return t.substr(0, i);
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t') return std::nullopt;
  }
  return t;
}

struct PtxHeader {
  std::string_view version;  ///< "9.0"
  std::string_view target;   ///< "sm_90a"
};

/// The `.version` and `.target` directives, which must be the first two directives of the
/// file (nvcc, NVRTC and the PTX ISA put them there; only comments and blank lines precede).
std::optional<PtxHeader> ptx_header(std::string_view t) {
  PtxHeader h;
  bool in_block_comment = false;
  while (!t.empty()) {
    const std::size_t nl = t.find('\n');
    std::string_view line = t.substr(0, nl);
    t = nl == std::string_view::npos ? std::string_view{} : t.substr(nl + 1);
    if (in_block_comment) {
      const std::size_t end = line.find("*/");
      if (end == std::string_view::npos) continue;
      line.remove_prefix(end + 2);
      in_block_comment = false;
    }
    if (auto c = line.find("//"); c != std::string_view::npos) line = line.substr(0, c);
    if (auto c = line.find("/*"); c != std::string_view::npos) {
      in_block_comment = line.find("*/", c) == std::string_view::npos;
      line = line.substr(0, c);
    }
    auto word = [&line]() {
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())) != 0) line.remove_prefix(1);
      std::size_t n = 0;
      while (n < line.size() && std::isspace(static_cast<unsigned char>(line[n])) == 0 && line[n] != ',') ++n;
      std::string_view w = line.substr(0, n);
      line.remove_prefix(n);
      return w;
    };
    const std::string_view d = word();
    if (d.empty()) continue;
    if (h.version.empty()) {
      if (d != ".version") return std::nullopt;
      h.version = word();
      if (h.version.empty()) return std::nullopt;
      continue;
    }
    if (d != ".target") return std::nullopt;
    h.target = word();
    if (h.target.empty()) return std::nullopt;
    return h;
  }
  return std::nullopt;
}

std::optional<unsigned> number(std::string_view s) {
  if (s.empty() || s.size() > 4) return std::nullopt;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v;
}

/// Whether a v8 cubin's .nv.compat section holds the arch-specific record (attribute 9 = 1).
/// Records are {u8 format, u8 attribute, ...}: formats 1-3 take 4 bytes, format 4 carries a u16
/// length after the attribute.
bool compat_says_arch_specific(const ElfFile& cubin) {
  const ElfSection* s = cubin.find(".nv.compat");
  if (s == nullptr) return false;
  auto bytes = cubin.section_bytes(*s);
  if (!bytes) return false;
  ByteReader r(*bytes, cubin.name(), s->offset);
  for (std::uint64_t o = 0; o + 4 <= r.size();) {
    auto fmt = r.u8(o, "compat record");
    auto attr = r.u8(o + 1, "compat record");
    auto value = r.u16(o + 2, "compat record");
    if (!fmt || !attr || !value) return false;
    if (*fmt == 4) {
      o += 4 + *value;
      continue;
    }
    if (*fmt == 0 || *fmt > 4) return false;
    if (*fmt == 2 && *attr == 9) return (*value & 0xff) != 0;
    o += 4;
  }
  return false;
}

/// ELF ABI v8 e_flags: the architecture-specific ("a") bit of ptxas 12.8-12.9.
constexpr std::uint32_t kCubinFlagArchSpecificV8 = 0x8;

FatbinEntry whole_file_entry(Bytes bytes) {
  FatbinEntry e;
  e.offset = 0;
  e.stored_size = bytes.size();
  e.flags = kEntryFlag64Bit;
  e.payload = bytes;
  return e;
}

Fatbin one_entry_fatbin(FatbinEntry e, std::uint64_t size) {
  if (e.arch.suffix == Suffix::a) e.flags |= kEntryFlagArchSpecific;
  if (e.arch.suffix == Suffix::f) e.flags |= kEntryFlagFamilySpecific;
  Fatbin fb;
  fb.section = FatbinSection::standalone;
  fb.size = size;
  fb.entries.push_back(std::move(e));
  return fb;
}

}  // namespace

DeviceFileKind classify_device_file(Bytes bytes) {
  if (looks_like_elf(bytes)) {
    // e_machine at 18 (little endian; the ELF reader accepts nothing else)
    return bytes.size() >= 20 && bytes[18] == std::byte{kElfMachineCuda & 0xff} && bytes[19] == std::byte{kElfMachineCuda >> 8}
               ? DeviceFileKind::cubin
               : DeviceFileKind::none;
  }
  ByteReader r(bytes, {});
  if (auto m = r.u32(0, "magic"); m && *m == kLtoIrMagic && bytes.size() >= kLtoIrHeaderSize) return DeviceFileKind::ltoir;
  if (auto head = text_head(bytes); head && ptx_header(*head)) return DeviceFileKind::ptx;
  return DeviceFileKind::none;
}

Result<Fatbin> read_standalone(Bytes bytes, const std::string& name) {
  const ByteReader r(bytes, name);
  switch (classify_device_file(bytes)) {
    case DeviceFileKind::cubin: {
      AG_TRY(ElfFile cubin, ElfFile::parse(bytes, name));
      FatbinEntry e = whole_file_entry(bytes);
      e.raw_kind = kEntryKindElf;
      e.kind = CodeKind::sass;
      const std::uint32_t flags = cubin.flags();
      const unsigned abi = cubin.abi_version();
      unsigned sm = 0;
      bool a = false;
      if (abi >= 8) {  // CUDA 12.8+ (sm >= 100) and CUDA 13
        sm = (flags >> 8) & 0xff;
        // Two spellings of "a": ptxas 13 writes .nv.compat record 9; ptxas 12.8/12.9 wrote
        // none and set e_flags bit 0x8 instead (flashinfer-cubin's sm_100a/sm_103a cubins;
        // their sm_100f and plain cubins leave it clear, docs/fatbin-format.md).
        a = (flags & kCubinFlagArchSpecificV8) != 0 || compat_says_arch_specific(cubin);
      } else {  // ABI v7 and older: SM in bits 7:0, 0x800 marks sm_90a
        sm = flags & 0xff;
        a = (flags & 0x800) != 0;
      }
      if (!plausible_sm(sm))
        return r.error_at(48, "cubin e_flags", "value " + hex(flags) + " (elf abi " + std::to_string(abi) + ") names no architecture (sm " + std::to_string(sm) + ")");
      e.arch = Arch{sm, a ? Suffix::a : Suffix::none};
      e.version = Version2{1, abi};
      return one_entry_fatbin(std::move(e), bytes.size());
    }
    case DeviceFileKind::ptx: {
      const auto h = ptx_header(*text_head(bytes));
      FatbinEntry e = whole_file_entry(bytes);
      e.raw_kind = kEntryKindPtx;
      e.kind = CodeKind::ptx;
      const std::size_t dot = h->version.find('.');
      const auto major = number(h->version.substr(0, dot));
      const auto minor = dot == std::string_view::npos ? std::optional<unsigned>{} : number(h->version.substr(dot + 1));
      if (!major || !minor)
        return r.error_at(0, "ptx .version", "'" + std::string(h->version) + "' is not a PTX ISA version such as 9.0");
      std::string_view t = h->target;
      Suffix suffix = Suffix::none;
      if (t.size() > 3 && (t.back() == 'a' || t.back() == 'f')) {
        suffix = t.back() == 'a' ? Suffix::a : Suffix::f;
        t.remove_suffix(1);
      }
      const auto sm = t.substr(0, 3) == "sm_" ? number(t.substr(3)) : std::nullopt;
      if (!sm || !plausible_sm(*sm))
        return r.error_at(0, "ptx .target", "'" + std::string(h->target) + "' names no architecture");
      e.arch = Arch{*sm, suffix};
      e.version = Version2{*major, *minor};
      return one_entry_fatbin(std::move(e), bytes.size());
    }
    case DeviceFileKind::ltoir: {
      AG_TRY(const std::uint16_t arch10, r.u16(0x1a, "lto-ir header"));
      const unsigned sm = arch10 / 10;
      if (arch10 % 10 != 0 || !plausible_sm(sm))
        return r.error_at(0x1a, "lto-ir header", "architecture " + hex(arch10) + " is not an sm number x 10");
      FatbinEntry e = whole_file_entry(bytes);
      e.raw_kind = kEntryKindLtoIr;
      e.kind = CodeKind::ltoir;
      e.arch = Arch{sm, Suffix::none};
      return one_entry_fatbin(std::move(e), bytes.size());
    }
    case DeviceFileKind::none:
      break;
  }
  return r.error_at(0, "file", "not a cubin, a PTX file or an LTO-IR file");
}

}  // namespace archguard
