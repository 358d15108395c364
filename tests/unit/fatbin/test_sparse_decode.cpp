// SPDX-License-Identifier: Apache-2.0
// Sparse decoding of large zstd cubins (decode_kernels keeps only the parts their kernel list
// reads): on synthetic cubins of three layouts (the tables first with the section table last, as
// nvcc writes them; the tables after the code, beyond the first pass's head; the section table
// first, as nvlink writes some), damaged ones and damaged frames, the list or the error is the
// one a whole decode gives, and the counts say which way each image went.
#include <archguard/fatbin.hpp>

#include <catch2/catch.hpp>
#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "byte_builder.hpp"

using namespace archguard;
using namespace fatbin_test;

namespace {

constexpr std::size_t kCode = std::size_t{6} << 20;  // past the first pass's 4 MiB head

/// Code bytes that compress a little (a counter mixed into each word), not to nothing.
Buf code_bytes(std::size_t n) {
  Buf b(n);
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 16 == 0) x = x * 1103515245u + 12345u;
    b[i] = static_cast<std::byte>((i % 16 < 4) ? (x >> (8 * (i % 4))) : (i & 0x7f));
  }
  return b;
}

enum class Layout { tables_first,
                    tables_after_code,
                    section_table_first };

struct Cubin {
  Buf bytes;
  std::vector<std::string> kernels;  ///< the entry points, in symbol-table order
};

/// A cubin (ELF64, machine 190) with kernels k0..k<n-1> (and a device function that is no
/// entry), `bad_name` makes the last symbol's name run past the string table.
Cubin make_cubin(Layout layout, int n, bool bad_name = false) {
  Cubin c;
  Buf shstr{std::byte{0}};
  const std::uint32_t n_shstr = add_name(shstr, ".shstrtab"), n_str = add_name(shstr, ".strtab"), n_sym = add_name(shstr, ".symtab"),
                      n_text = add_name(shstr, ".text");
  Buf strtab{std::byte{0}};
  Buf symtab(24, std::byte{0});  // symbol 0
  auto symbol = [&](const std::string& name, bool entry) {
    put(symtab, add_name(strtab, name), 4);
    symtab.push_back(std::byte{0x12});                         // global function
    symtab.push_back(entry ? std::byte{0x10} : std::byte{0});  // CUDA entry bit
    put(symtab, 4, 2);                                         // in .text
    put(symtab, 0, 8);
    put(symtab, 16, 8);
  };
  for (int i = 0; i < n; ++i) {
    c.kernels.push_back("_Z2k" + std::to_string(i) + "Pf");
    symbol(c.kernels.back(), true);
  }
  symbol("_Z6helperv", false);
  if (bad_name) put_at(symtab, symtab.size() - 24, strtab.size() + 100, 4);
  const Buf code = code_bytes(kCode);
  struct Part {
    std::uint32_t name, type;
    const Buf* body;
    std::uint32_t link;
    std::uint64_t entsize;
  };
  // Sections: 0 null, 1 .shstrtab, 2 .strtab, 3 .symtab, 4 .text; bodies placed in `order`.
  const std::vector<Part> parts{{n_shstr, 3, &shstr, 0, 0}, {n_str, 3, &strtab, 0, 0}, {n_sym, 2, &symtab, 2, 24}, {n_text, 1, &code, 0, 0}};
  std::vector<int> order = layout == Layout::tables_after_code ? std::vector<int>{3, 0, 1, 2} : std::vector<int>{0, 1, 2, 3};
  Buf out(64, std::byte{0});
  const std::size_t table_size = 64 * (parts.size() + 1);
  std::uint64_t shoff = 0;
  if (layout == Layout::section_table_first) {
    shoff = out.size();
    out.resize(out.size() + table_size);
  }
  std::vector<std::uint64_t> at(parts.size());
  for (int i : order) {
    pad_to(out, 8);
    at[static_cast<std::size_t>(i)] = out.size();
    out.insert(out.end(), parts[static_cast<std::size_t>(i)].body->begin(), parts[static_cast<std::size_t>(i)].body->end());
  }
  pad_to(out, 8);
  if (layout != Layout::section_table_first) {
    shoff = out.size();
    out.resize(out.size() + table_size);
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::size_t h = shoff + 64 * (i + 1);
    put_at(out, h, parts[i].name, 4);
    put_at(out, h + 4, parts[i].type, 4);
    put_at(out, h + 24, at[i], 8);
    put_at(out, h + 32, parts[i].body->size(), 8);
    put_at(out, h + 40, parts[i].link, 4);
    put_at(out, h + 56, parts[i].entsize, 8);
  }
  const unsigned char ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  for (int i = 0; i < 16; ++i) out[static_cast<std::size_t>(i)] = std::byte{ident[i]};
  put_at(out, 16, 2, 2);    // ET_EXEC
  put_at(out, 18, 190, 2);  // EM_CUDA
  put_at(out, 20, 1, 4);
  put_at(out, 40, shoff, 8);
  put_at(out, 52, 64, 2);
  put_at(out, 58, 64, 2);
  put_at(out, 60, parts.size() + 1, 2);
  put_at(out, 62, 1, 2);
  c.bytes = std::move(out);
  return c;
}

Buf zstd_of(const Buf& image) {
  Buf z(ZSTD_compressBound(image.size()));
  const std::size_t n = ZSTD_compress(z.data(), z.size(), image.data(), image.size(), 1);
  REQUIRE(ZSTD_isError(n) == 0);
  z.resize(n);
  return z;
}

/// A zstd SASS entry of `payload` claiming `claim` bytes; `keep` holds the fatbin.
FatbinEntry zstd_entry(const Buf& payload, std::uint64_t claim, Buf& keep, std::uint32_t compressed = 0) {
  Buf p = payload;
  pad_to(p, 8);
  Buf e;
  put_entry_header(e, {.kind = 2, .payload_size = p.size(), .compressed = compressed, .arch = 90, .flags = 0x11 | kEntryFlagZstd, .uncompressed = claim});
  e.insert(e.end(), p.begin(), p.end());
  keep = fatbin_around(e, kFatbinMagic);
  auto fbs = Fatbin::parse_all(keep, "sparse.fatbin", FatbinSection::memory);
  REQUIRE(fbs.ok());
  return fbs->at(0).entries.at(0);
}

/// The kernels (mangled, in order) or the error of decode_kernels, decoded sparsely or whole.
std::string listed(const FatbinEntry& e, bool sparse) {
  const std::uint64_t before = set_sparse_decode_from(sparse ? 0 : UINT64_MAX);
  auto k = decode_kernels(e, "sparse.fatbin");
  set_sparse_decode_from(before);
  if (!k) return "error: " + k.message();
  std::string s;
  for (const auto& x : *k) s += x.name + " ";
  return s;
}

std::string names(const Cubin& c) {
  std::string s;
  for (const auto& k : c.kernels) s += k + " ";
  return s;
}

}  // namespace

TEST_CASE("a large cubin's kernels from the parts that hold them: the list of a whole decode", "[fatbin][sparse]") {
  struct Case {
    Layout layout;
    std::uint64_t one, two;  // the count that moves
    const char* what;
  };
  for (const Case& c : {Case{Layout::tables_first, 1, 0, "tables first (nvcc)"}, Case{Layout::tables_after_code, 0, 1, "tables after the code"},
                        Case{Layout::section_table_first, 1, 0, "section table first"}}) {
    INFO(c.what);
    const Cubin cubin = make_cubin(c.layout, 300);
    Buf keep;
    const FatbinEntry e = zstd_entry(zstd_of(cubin.bytes), cubin.bytes.size(), keep);
    const std::string whole = listed(e, false);
    CHECK(whole == names(cubin));
    const SparseDecodeCounts before = sparse_decode_counts();
    CHECK(listed(e, true) == whole);
    const SparseDecodeCounts after = sparse_decode_counts();
    CHECK(after.one_pass - before.one_pass == c.one);
    CHECK(after.two_passes - before.two_passes == c.two);
    CHECK(after.whole == before.whole);
    CHECK(zstd_decoder_bytes() <= (std::size_t{1} << 20));  // the window went with the image
  }
}

TEST_CASE("a damaged large cubin or frame gives the error a whole decode gives", "[fatbin][sparse]") {
  const Cubin good = make_cubin(Layout::tables_first, 50);
  const Buf z = zstd_of(good.bytes);
  Buf keep;
  SECTION("a symbol name past its string table") {
    const Cubin bad = make_cubin(Layout::tables_first, 50, true);
    const FatbinEntry e = zstd_entry(zstd_of(bad.bytes), bad.bytes.size(), keep);
    const std::string whole = listed(e, false);
    CHECK(whole.rfind("error: ", 0) == 0);
    CHECK(listed(e, true) == whole);
  }
  SECTION("a frame cut short") {
    const Buf cut(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(z.size() / 2));
    const FatbinEntry e = zstd_entry(cut, good.bytes.size(), keep);
    const std::string whole = listed(e, false);
    INFO(whole);
    CHECK(whole.rfind("error: ", 0) == 0);
    const SparseDecodeCounts before = sparse_decode_counts();
    CHECK(listed(e, true) == whole);
    CHECK(sparse_decode_counts().whole == before.whole + 1);
  }
  SECTION("a claim one byte short, and one byte long") {
    for (std::uint64_t claim : {good.bytes.size() - 1, good.bytes.size() + 1}) {
      const FatbinEntry e = zstd_entry(z, claim, keep);
      const std::string whole = listed(e, false);
      CHECK(whole.rfind("error: ", 0) == 0);
      CHECK(listed(e, true) == whole);
    }
  }
  SECTION("a corrupt byte in the middle of the frame") {
    Buf bad = z;
    bad[bad.size() / 2] ^= std::byte{0x5a};
    const FatbinEntry e = zstd_entry(bad, good.bytes.size(), keep);
    CHECK(listed(e, true) == listed(e, false));
  }
  SECTION("bytes after the frame, its size stated in the header") {
    Buf more = z;
    more.resize(more.size() + 4096, std::byte{0x42});
    const FatbinEntry e = zstd_entry(more, good.bytes.size(), keep, static_cast<std::uint32_t>(z.size()));
    CHECK(listed(e, false) == names(good));
    CHECK(listed(e, true) == names(good));
  }
}

TEST_CASE("an image below the sparse size is decoded whole", "[fatbin][sparse]") {
  const Cubin cubin = make_cubin(Layout::tables_first, 10);
  Buf keep;
  const FatbinEntry e = zstd_entry(zstd_of(cubin.bytes), cubin.bytes.size(), keep);
  REQUIRE(sparse_decode_from() > cubin.bytes.size());  // the default, 16 MiB
  const SparseDecodeCounts before = sparse_decode_counts();
  auto k = decode_kernels(e, "sparse.fatbin");
  REQUIRE(k.ok());
  CHECK(k->size() == 10);
  const SparseDecodeCounts after = sparse_decode_counts();
  CHECK(after.one_pass + after.two_passes + after.whole == before.one_pass + before.two_passes + before.whole);
}

TEST_CASE("a large cubin with damaged headers, tables or names: the sparse list or error is the whole one", "[fatbin][sparse]") {
  // Bytes of the ELF header, the section table (last, as nvcc writes it) and the tables at the
  // start are changed at random (a fixed seed): whatever the damage, the two decodes agree.
  const Cubin good = make_cubin(Layout::tables_first, 40);
  const Buf& img = good.bytes;
  const std::uint64_t shoff = [&] {
    std::uint64_t v = 0;
    std::memcpy(&v, img.data() + 40, sizeof v);
    return v;
  }();
  std::uint32_t x = 2024;
  auto next = [&x] { return x = x * 1664525u + 1013904223u; };
  int errors = 0;
  for (int round = 0; round < 24; ++round) {
    Buf bad = img;
    for (int k = 0; k < 3; ++k) {
      const std::uint32_t where = next() % 3;
      std::size_t at = where == 0 ? 16 + next() % 48 : where == 1 ? shoff + next() % (img.size() - shoff)
                                                                  : 64 + next() % 4096;
      bad[at] = static_cast<std::byte>(next() & 0xff);
    }
    Buf keep;
    const FatbinEntry e = zstd_entry(zstd_of(bad), bad.size(), keep);
    const std::string whole = listed(e, false);
    INFO("round " << round << ": " << whole.substr(0, 200));
    CHECK(listed(e, true) == whole);
    errors += whole.rfind("error: ", 0) == 0 ? 1 : 0;
  }
  CHECK(errors > 0);  // some damage is seen
}
