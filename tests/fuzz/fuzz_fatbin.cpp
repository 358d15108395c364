// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the fatbin reader, with the CLI's own limits (ScanOptions' defaults: inflate
// budgets, member size, nesting depth; decompress's default image limit) and the CLI's way in:
// the bytes are written to a file and read with scan_path (mapping, peek, libarchive reading
// the file), then as bytes in memory as a raw fatbin region, as a section embedding fatbins and as a standalone cubin/PTX/LTO-IR file; every image is decompressed
// and its kernels listed. Built with libFuzzer by run_libfuzzer.sh (clang); replayed over the
// corpora by replay_main.cpp.
#include <archguard/container.hpp>
#include <archguard/fatbin.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

/// Set by replay_main.cpp while it replays prefixes of an input (weak: 0 under libFuzzer).
extern "C" {
__attribute__((weak)) int archguard_fuzz_prefix_run = 0;
}

namespace {

void decode_all(const archguard::ObjectFatbins& object, const archguard::DerivedLimits& limits = {}) {
  for (const auto& fb : object.fatbins) {
    (void)fb.images();
    (void)fb.identifier();
    for (const auto& e : fb.entries) {
      if (e.kind == archguard::CodeKind::ltoir) continue;
      auto image = archguard::decompress(e, object.path);  // the CLI's limit
      if (!image) continue;
      (void)archguard::list_kernels(e, *image, object.path, limits);
    }
  }
}

/// Appends the low `n` bytes of `v` (the host is little endian, as the reader requires).
void put(std::vector<std::byte>& b, std::uint64_t v, std::size_t n) {
  const std::size_t at = b.size();
  b.resize(at + n);
  std::memcpy(b.data() + at, &v, n);
}

/// A ustar member (names cut to 99 bytes), padded to 512 bytes.
void tar_member(std::vector<std::byte>& out, const std::string& name, archguard::Bytes data, char type = '0') {
  std::vector<std::byte> h(512, std::byte{0});
  auto field = [&h](std::size_t at, const std::string& text, std::size_t width) {
    for (std::size_t i = 0; i < text.size() && i + 1 < width; ++i) h[at + i] = static_cast<std::byte>(text[i]);
  };
  auto octal = [](std::uint64_t v, int digits) {
    std::string o(static_cast<std::size_t>(digits), '0');
    for (int i = digits - 1; i >= 0 && v != 0; --i, v >>= 3) o[static_cast<std::size_t>(i)] = static_cast<char>('0' + (v & 7));
    return o;
  };
  field(0, name.substr(0, 99), 100);
  field(100, "0000644", 8);
  field(108, "0000000", 8);
  field(116, "0000000", 8);
  field(124, octal(data.size(), 11), 12);
  field(136, "00000000000", 12);
  h[156] = static_cast<std::byte>(type);
  field(257, "ustar", 6);
  h[263] = std::byte{'0'};
  h[264] = std::byte{'0'};
  unsigned sum = 8 * ' ';  // the checksum field counts as spaces
  for (std::size_t i = 0; i < 512; ++i)
    if (i < 148 || i >= 156) sum += std::to_integer<unsigned>(h[i]);
  field(148, octal(sum, 6), 8);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  out.resize((out.size() + 511) / 512 * 512, std::byte{0});
}

/// A `docker save` image of two layers: the first holds `object` (the input) at a few paths, the second an
/// empty member per line of the input (whiteouts, opaque markers and replacements when the
/// input names them: `lib/.wh.x.so`, `opt/.wh..wh..opq`), then manifest.json. Read as the CLI
/// reads an image, with the layers applied (container.cpp, apply_layers).
void image(const std::uint8_t* data, std::size_t size, archguard::Bytes object) {
  std::vector<std::byte> l1, l2, img;
  for (const char* path : {"lib/x.so", "opt/d/y.so", "usr/lib/z.so", "x.so"}) tar_member(l1, path, object);
  tar_member(l1, "opt/d/", {}, '5');
  l1.resize(l1.size() + 1024, std::byte{0});
  std::string line;
  std::size_t names = 0;
  for (std::size_t i = 0; i <= size && names < 64; ++i) {
    if (i < size && data[i] != '\n' && data[i] != 0) {
      line.push_back(static_cast<char>(data[i]));
      continue;
    }
    if (!line.empty()) {
      const bool replace = (line.size() & 1) != 0;  // some names carry the object again
      tar_member(l2, line, replace ? object : archguard::Bytes{}, line.back() == '/' ? '5' : '0');
      ++names;
    }
    line.clear();
  }
  l2.resize(l2.size() + 1024, std::byte{0});
  tar_member(img, "l1/layer.tar", l1);
  tar_member(img, "l2/layer.tar", l2);
  const std::string manifest = R"([{"Config":"c.json","Layers":["l1/layer.tar","l2/layer.tar"]}])";
  tar_member(img, "manifest.json", archguard::Bytes(reinterpret_cast<const std::byte*>(manifest.data()), manifest.size()));
  img.resize(img.size() + 1024, std::byte{0});
  archguard::ScanOptions options;
  options.threads = 1;
  auto report = archguard::scan_bytes(img, "fuzz-image.tar", options);
  if (report)
    for (const auto& o : report->objects) decode_all(o);
}

/// The input amplified to the sizes where the CLI's limits act (issue 22), which the raw input
/// of a few KB never reaches: an ELF file whose string tables are the input, named by up to
/// 20,000 section headers and as many symbols at offsets taken from the input (name bombs,
/// names overlapping at every offset), read as a host object and as a cubin; and the input
/// repeated to 64 KiB as a data section (long entry chains for the embedded search). The host
/// object is read again under lowered limits (DerivedLimits); the input is also read inside a
/// container image whose second layer the input names (image).
void amplified(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return;
  const std::size_t count = (static_cast<std::size_t>(data[0]) | static_cast<std::size_t>(data[1]) << 8) % 4097;
  auto word = [&](std::size_t i) {  // an offset into the table, from the input
    std::uint32_t w = 0;
    for (std::size_t k = 0; k < 4; ++k) w = w << 8 | data[(i * 4 + k) % size];
    return w % static_cast<std::uint32_t>(size);
  };
  const archguard::Bytes table(reinterpret_cast<const std::byte*>(data), size);  // the fuzzer's buffer
  for (std::uint16_t machine : {std::uint16_t{62}, std::uint16_t{190}}) {
    std::vector<std::byte> f(64, std::byte{0});
    f.reserve(64 + size + 8 + 24 * (count + 1) + 64 * (count + 3));
    const std::uint64_t strs = f.size();
    f.insert(f.end(), table.begin(), table.end());
    while (f.size() % 8 != 0) f.push_back(std::byte{0});
    const std::uint64_t syms = f.size();
    f.resize(f.size() + 24, std::byte{0});
    for (std::size_t i = 0; i < count; ++i) {
      put(f, std::uint64_t{word(i)} | std::uint64_t{0x12} << 32 | std::uint64_t{0x10} << 40 | std::uint64_t{1} << 48, 8);
      put(f, 0, 8);
      put(f, 0, 8);
    }
    const std::uint64_t shoff = f.size();
    auto header = [&f](std::uint32_t name, std::uint32_t type, std::uint64_t off, std::uint64_t sz, std::uint32_t link, std::uint64_t es) {
      put(f, std::uint64_t{name} | std::uint64_t{type} << 32, 8);
      put(f, 2, 8);
      put(f, 0, 8);
      put(f, off, 8);
      put(f, sz, 8);
      put(f, link, 8);
      put(f, 8, 8);
      put(f, es, 8);
    };
    header(0, 0, 0, 0, 0, 0);
    header(0, 3, strs, size, 0, 0);               // 1: the names (.shstrtab and .strtab)
    header(0, 2, syms, 24 * (count + 1), 1, 24);  // 2: the symbols
    for (std::size_t i = 0; i < count; ++i) header(word(i + count), 1, strs, size, 0, 0);
    const std::size_t n = 3 + count;
    const unsigned char ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    for (int i = 0; i < 16; ++i) f[static_cast<std::size_t>(i)] = std::byte{ident[i]};
    auto at = [&f](std::size_t o, std::uint64_t v, int k) {
      for (int i = 0; i < k; ++i) f[o + static_cast<std::size_t>(i)] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
    };
    at(16, machine == 190 ? 2 : 3, 2);
    at(18, machine, 2);
    at(40, shoff, 8);
    at(52, 64, 2);
    at(58, 64, 2);
    at(60, n, 2);
    at(62, 1, 2);
    auto report = archguard::scan_bytes(f, "fuzz-amplified");
    if (report)
      for (const auto& o : report->objects) decode_all(o);
    // Again under limits lowered as far as ARCHGUARD_MAX_NAME_LENGTH, _KERNEL_NAMES and
    // _SEARCH_WORK allow (1): small inputs then reach every limit's path.
    archguard::ScanOptions low;
    low.threads = 1;
    low.limits.max_name_length = data[2] % 64 + 1;
    low.limits.max_kernel_name_bytes = std::uint64_t{data[3]} * 16 + 1;
    low.limits.search_work_per_8_bytes = 1;
    low.limits.search_work_floor = data[2] & 1;
    auto lowered = archguard::scan_bytes(f, "fuzz-amplified-low", low);
    if (lowered)
      for (const auto& o : lowered->objects) decode_all(o, low.limits);
    if (machine == 62) image(data, size, table);  // the raw input as the layers' file: the amplified object made it 70 times slower
    if (machine == 190) {                         // the cubin as the image of a fatbin entry (decode_all listed its kernels)
      archguard::FatbinEntry e;
      e.kind = archguard::CodeKind::sass;
      e.raw_kind = archguard::kEntryKindElf;
      (void)archguard::check_cubin_image(e, f, "fuzz-amplified");
    }
  }
  std::vector<std::byte> repeated;
  repeated.reserve(std::size_t{1} << 16);
  while (repeated.size() + size <= (std::size_t{1} << 16)) repeated.insert(repeated.end(), table.begin(), table.end());
  std::string problem;
  archguard::ObjectFatbins embedded;
  embedded.path = "fuzz-repeated";
  embedded.fatbins = archguard::find_embedded_fatbins(repeated, "fuzz-repeated", ".rodata", 0, 0, {}, {}, 1, &problem);
  decode_all(embedded);
}

/// What a report says, for comparing two readings of the same bytes: objects, fatbins, images
/// (payloads by content), errors and notes.
std::string summary(const archguard::Result<archguard::ScanReport>& r) {
  if (!r) return "error " + r.message() + "\n";
  std::string s;
  for (const auto& k : r->skipped) s += "skipped " + k + "\n";
  for (const auto& e : r->errors) s += "error " + e + "\n";
  for (const auto& o : r->objects) {
    s += "object " + o.path + " | " + o.archive + " | " + o.member + " " + std::to_string(o.fatbins.size()) + "\n";
    for (const auto& fb : o.fatbins) {
      s += " fatbin " + std::to_string(fb.offset) + " " + std::to_string(fb.size) + " " + fb.section_name + " " + fb.translation_unit + "\n";
      for (const auto& e : fb.entries) {
        std::uint64_t h = 1469598103934665603u;  // FNV-1a of the payload
        for (std::byte b : e.payload) h = (h ^ std::to_integer<std::uint64_t>(b)) * 1099511628211u;
        s += "  entry " + std::to_string(e.offset) + " " + std::to_string(e.payload.size()) + " " + std::to_string(h) + "\n";
      }
    }
  }
  return s;
}

/// One file per process, rewritten for every input.
const std::string& input_file() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr && *dir != 0 ? dir : "/tmp") + "/archguard-fuzz-" + std::to_string(::getpid());
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  archguard::ScanOptions options;  // the CLI's defaults
  options.threads = 1;
  const archguard::Bytes bytes(reinterpret_cast<const std::byte*>(data), size);  // the fuzzer's buffer
  const std::string& path = input_file();
  // The bytes read from memory, under the file's name: every member of an archive is copied.
  auto report = archguard::scan_bytes(bytes, path, options);
  if (report)
    for (const auto& o : report->objects) decode_all(o);
  // The same bytes written to a file and read as the CLI reads it: the mapped file's plain ar
  // and tar members are read in place. The two readings must agree.
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    const bool written = std::fwrite(data, 1, size, f) == size;
    std::fclose(f);
    if (written) {
      auto mapped = archguard::scan_path(path, options);
      if (mapped)
        for (const auto& o : mapped->objects) decode_all(o);
      const std::string from_file = summary(mapped), from_memory = summary(report);
      if (from_file != from_memory) {
        std::fprintf(stderr, "the file and its bytes in memory read differently:\n--- file\n%s--- memory\n%s", from_file.c_str(),
                     from_memory.c_str());
        std::abort();
      }
    }
    std::remove(path.c_str());
  }
  // The bytes as a loaded data section that may embed fatbins, and as a standalone file.
  for (std::uint64_t address : {0, 4}) {
    archguard::ObjectFatbins embedded;
    embedded.path = "fuzz-section";
    embedded.fatbins = archguard::find_embedded_fatbins(bytes, "fuzz-section", ".rodata", 0, address);
    decode_all(embedded);
  }
  if (auto standalone = archguard::read_standalone(bytes, "fuzz-file")) {
    archguard::ObjectFatbins o;
    o.path = "fuzz-file";
    o.fatbins.push_back(std::move(*standalone));
    decode_all(o);
  }
  if (archguard_fuzz_prefix_run == 0) amplified(data, size);  // whole inputs only when replaying
  auto region = archguard::Fatbin::parse_all(bytes, "fuzz-region");
  if (region) {
    archguard::ObjectFatbins o;
    o.path = "fuzz-region";
    o.fatbins = std::move(*region);
    decode_all(o);
  }
  return 0;
}
