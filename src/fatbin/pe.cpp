// SPDX-License-Identifier: Apache-2.0
// PE/COFF (Microsoft PE and COFF Specification): the DOS header's e_lfanew at 0x3c leads to
// "PE\0\0", the COFF header (machine, number of sections, size of the optional header,
// characteristics) and the section table (40 bytes a section: name[8], virtual size, virtual
// address, size of raw data, pointer to raw data, ...).
#include <archguard/pe.hpp>

#include <algorithm>

namespace archguard {
namespace {

constexpr std::uint16_t kMachineAmd64 = 0x8664;
constexpr std::uint16_t kMachineArm64 = 0xaa64;
constexpr std::uint16_t kCharacteristicDll = 0x2000;
constexpr std::uint16_t kMaxSections = 96;  // the loader's limit

}  // namespace

bool looks_like_pe(Bytes b) {
  if (b.size() < 0x40 || b[0] != std::byte{'M'} || b[1] != std::byte{'Z'}) return false;
  const ByteReader r(b, {});
  auto lfanew = r.u32(0x3c, "e_lfanew");
  if (!lfanew) return false;
  auto sig = r.u32(*lfanew, "pe signature");
  return sig && *sig == 0x00004550;  // "PE\0\0"
}

Result<ObjectFatbins> read_pe(Bytes bytes, std::string path, std::string archive, std::string member) {
  const ByteReader r(bytes, path);
  AG_TRY(const std::uint32_t pe, r.u32(0x3c, "pe e_lfanew"));
  AG_TRY(const std::uint32_t sig, r.u32(pe, "pe signature"));
  if (sig != 0x00004550) return r.error_at(pe, "pe signature", "value " + hex(sig) + " is not PE\\0\\0");
  AG_TRY(const std::uint16_t machine, r.u16(pe + 4, "coff machine"));
  AG_TRY(const std::uint16_t sections, r.u16(pe + 6, "coff number of sections"));
  AG_TRY(const std::uint16_t optional_size, r.u16(pe + 20, "coff size of optional header"));
  AG_TRY(const std::uint16_t characteristics, r.u16(pe + 22, "coff characteristics"));
  if (sections > kMaxSections)
    return r.error_at(pe + 6, "coff number of sections", "value " + std::to_string(sections) + " is more than " + std::to_string(kMaxSections));
  ObjectFatbins o;
  o.path = std::move(path);
  o.archive = std::move(archive);
  o.member = std::move(member);
  o.pe = true;
  o.elf_type = (characteristics & kCharacteristicDll) != 0 ? 3 : 2;
  o.machine = machine == kMachineAmd64 ? 62 : machine == kMachineArm64 ? 183
                                                                       : 0;
  const std::uint64_t table = std::uint64_t{pe} + 24 + optional_size;
  std::vector<Fatbin> main, rel;
  for (std::uint16_t i = 0; i < sections; ++i) {
    const std::uint64_t at = table + std::uint64_t{i} * 40;
    AG_TRY(Bytes raw_name, r.span(at, 8, "pe section header"));
    std::string name;
    for (std::byte c : raw_name) {
      if (c == std::byte{0}) break;
      name += static_cast<char>(c);
    }
    const bool is_main = name == ".nv_fatb", is_rel = name == "__nv_rel";
    if (!is_main && !is_rel) continue;
    AG_TRY(const std::uint32_t virtual_size, r.u32(at + 8, "pe section virtual size"));
    AG_TRY(const std::uint32_t raw_size, r.u32(at + 16, "pe section size of raw data"));
    AG_TRY(const std::uint32_t raw_at, r.u32(at + 20, "pe section pointer to raw data"));
    // The raw data is padded to the file alignment; the virtual size is what the section holds.
    const std::uint64_t size = virtual_size != 0 ? std::min<std::uint64_t>(virtual_size, raw_size) : raw_size;
    if (!r.contains(raw_at, size))
      return r.error_at(at + 20, "pe section " + name, "raw data at " + hex(raw_at) + " of " + hex(size) + " bytes runs past the end of the file (" + hex(r.size()) + " bytes)");
    auto fatbins = Fatbin::parse_all(bytes.subspan(raw_at, static_cast<std::size_t>(size)), o.path,
                                     is_main ? FatbinSection::nv_fatbin : FatbinSection::nv_relfatbin, raw_at);
    if (!fatbins) return fatbins.error();
    for (Fatbin& fb : *fatbins) {
      fb.section_name = name;
      (is_main ? main : rel).push_back(std::move(fb));
    }
  }
  // .nv_fatbin first, then __nv_relfatbin, numbered in that order (as for ELF)
  for (auto* list : {&main, &rel})
    for (Fatbin& fb : *list) {
      fb.index = o.fatbins.size();
      o.fatbins.push_back(std::move(fb));
    }
  return o;
}

}  // namespace archguard
