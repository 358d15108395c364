// SPDX-License-Identifier: Apache-2.0
// The fatbin reader on synthetic bytes: every header field, every error path, bounded
// decompression with real liblz4/libzstd payloads, kernel listing, cuobjdump names.
#include <archguard/bytes.hpp>
#include <archguard/container.hpp>
#include <archguard/fatbin.hpp>

#include <catch2/catch.hpp>
#include <elf.h>
#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "byte_builder.hpp"

using namespace archguard;
using namespace fatbin_test;

namespace {

struct EntrySpec {
  std::uint16_t kind = 2;
  std::uint32_t arch = 80;
  std::uint64_t flags = 0x11;
  std::uint16_t major = 1, minor = 8;
  Buf payload = bytes_of("payload!");
  std::uint32_t compressed = 0;
  std::uint64_t uncompressed = 0;
  std::string identifier;
  std::string options;
};

EntrySpec spec(std::uint16_t kind, std::uint32_t arch, std::uint64_t flags, std::uint16_t major,
               std::uint16_t minor, Buf payload, std::uint32_t compressed = 0, std::uint64_t uncompressed = 0) {
  EntrySpec s;
  s.kind = kind;
  s.arch = arch;
  s.flags = flags;
  s.major = major;
  s.minor = minor;
  s.payload = std::move(payload);
  s.compressed = compressed;
  s.uncompressed = uncompressed;
  return s;
}

Buf make_entry(const EntrySpec& s) {
  Buf ext;
  std::uint32_t id_off = 0, id_len = 0, opt_at = 0;
  if (!s.identifier.empty()) {
    id_off = 0x40;
    id_len = static_cast<std::uint32_t>(s.identifier.size());
    for (char c : s.identifier) ext.push_back(static_cast<std::byte>(c));
    ext.push_back(std::byte{0});
    pad_to(ext, 8);
  }
  if (!s.options.empty()) {
    opt_at = static_cast<std::uint32_t>(0x40 + ext.size());
    put(ext, opt_at + 8, 4);
    put(ext, s.options.size(), 4);
    for (char c : s.options) ext.push_back(static_cast<std::byte>(c));
    ext.push_back(std::byte{0});
    pad_to(ext, 8);
  }
  Buf payload = s.payload;
  pad_to(payload, 8);
  Buf e;
  put_entry_header(e, {.kind = s.kind,
                       .header_size = static_cast<std::uint32_t>(0x40 + ext.size()),
                       .payload_size = payload.size(),
                       .compressed = s.compressed,
                       .options_at = opt_at,
                       .minor = s.minor,
                       .major = s.major,
                       .arch = s.arch,
                       .identifier_at = id_off,
                       .identifier_size = id_len,
                       .flags = s.flags,
                       .uncompressed = s.uncompressed});
  e.insert(e.end(), ext.begin(), ext.end());
  e.insert(e.end(), payload.begin(), payload.end());
  return e;
}

Buf make_fatbin(const std::vector<EntrySpec>& entries) {
  Buf body;
  for (const auto& s : entries) {
    Buf e = make_entry(s);
    body.insert(body.end(), e.begin(), e.end());
  }
  return fatbin_around(body, kFatbinMagic);
}

std::string first_error(const Buf& b, const std::string& name = "t.fatbin") {
  auto r = Fatbin::parse_all(b, name);
  return r ? std::string("ok") : r.message();
}

const std::string kPtx =
    "//\n.version 9.0\n.target sm_80\n.address_size 64\n"
    "// .entry in a comment is not a kernel: .entry\n"
    ".visible .entry _Z5scalePfi(\n.param .u64 p\n)\n{\nret;\n}\n"
    ".entry plain_c_kernel\n{\nret;\n}\n"
    ".func helper()\n{\nret;\n}\n";

}  // namespace

TEST_CASE("byte reader checks every read and names file and absolute offset", "[fatbin]") {
  Buf b = bytes_of("abcdefgh");
  ByteReader r(b, "lib.so", 0x1000);
  REQUIRE(r.u32(4, "field").ok());
  CHECK(*r.u32(4, "field") == 0x68676665u);
  auto past = r.u64(4, "field");
  REQUIRE_FALSE(past.ok());
  CHECK(past.message() == "lib.so: field at 0x1004: 0x8 bytes run past the end 0x1008");
  CHECK_FALSE(r.u8(UINT64_MAX, "x").ok());           // no wrap-around
  CHECK_FALSE(r.span(UINT64_MAX - 2, 8, "x").ok());  // overflowing end
  CHECK_FALSE(r.cstring(0, "name").ok());            // no NUL before the end
  auto sub = r.sub(2, 4, "part");
  REQUIRE(sub.ok());
  CHECK(sub->base() == 0x1002);
  CHECK_FALSE(sub->u32(1, "y").ok());
  CHECK(checked_add(UINT64_MAX, 1) == std::nullopt);
  CHECK(hex(0x1a40) == "0x1a40");
}

TEST_CASE("every entry header field is decoded", "[fatbin]") {
  EntrySpec sass = spec(2, 90, 0x100013, 1, 8, bytes_of("cubin..."));
  sass.identifier = "kernels.cu";
  EntrySpec ptx = spec(1, 100, 0x200011, 9, 0, bytes_of(kPtx));
  ptx.options = "-O2";
  EntrySpec lto = spec(8, 80, 0x11, 1, 65, bytes_of("ltoir"));
  const Buf b = make_fatbin({sass, ptx, lto});
  auto r = Fatbin::parse_all(b, "t.fatbin", FatbinSection::nv_fatbin, 0x400);
  REQUIRE(r.ok());
  REQUIRE(r->size() == 1);
  const Fatbin& fb = r->front();
  CHECK(fb.offset == 0x400);
  CHECK(fb.version == 1);
  CHECK(fb.size == b.size());
  REQUIRE(fb.entries.size() == 3);
  const FatbinEntry& e0 = fb.entries[0];
  CHECK(e0.kind == CodeKind::sass);
  CHECK(e0.arch == Arch{90, Suffix::a});
  CHECK(e0.debug);
  CHECK(e0.identifier == "kernels.cu");
  CHECK(e0.version == Version2{1, 8});
  CHECK(e0.compression == Compression::none);
  CHECK(e0.offset == 0x400 + 16);
  CHECK(e0.header_size == 0x50);
  CHECK(e0.image_size() == 8);
  const FatbinEntry& e1 = fb.entries[1];
  CHECK(e1.kind == CodeKind::ptx);
  CHECK(e1.arch == Arch{100, Suffix::f});
  CHECK(e1.version == Version2{9, 0});
  CHECK(e1.options == "-O2");
  CHECK_FALSE(e1.debug);
  CHECK(fb.entries[2].kind == CodeKind::ltoir);
  CHECK(fb.identifier() == "kernels.cu");
  CHECK_FALSE(fb.only_specific());
  const auto images = fb.images();
  REQUIRE(images.size() == 3);
  CHECK(images[1].ptx_isa == Version2{9, 0});
  CHECK(images[0].ptx_isa.empty());
}

TEST_CASE("fatbins back to back with zero padding", "[fatbin]") {
  Buf a = make_fatbin({EntrySpec{}});
  Buf b = make_fatbin({spec(1, 75, 0x11, 9, 0, bytes_of("ptx text"))});
  Buf all = a;
  all.insert(all.end(), 8, std::byte{0});
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), 24, std::byte{0});
  auto r = Fatbin::parse_all(all, "t");
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  CHECK((*r)[1].offset == a.size() + 8);
  CHECK((*r)[1].index == 1);
  CHECK((*r)[1].entries[0].arch.sm == 75);
  CHECK(Fatbin::parse_all(Buf(64, std::byte{0}), "zeros")->empty());
}

TEST_CASE("malformed headers give errors naming file, offset and value", "[fatbin]") {
  Buf good = make_fatbin({EntrySpec{}});
  SECTION("bad magic") {
    CHECK(first_error(patched(good, 0, 0xdeadbeef, 4)) == "t.fatbin: fatbin 0 at 0x0: bad magic 0xdeadbeef (expected 0xba55ed50)");
  }
  SECTION("fat size past the section") {
    CHECK(first_error(patched(good, 8, 0x1000, 8)).find("size 0x1000 runs past the section end") != std::string::npos);
  }
  SECTION("fat size overflowing 64 bits") {
    CHECK(first_error(patched(good, 8, UINT64_MAX - 4, 8)).find("runs past the section end") != std::string::npos);
  }
  SECTION("entry header size below 0x40") {
    CHECK(first_error(patched(good, 16 + 4, 0x20, 4)) == "t.fatbin: fatbin 0 entry 0 at 0x14: entry header size 0x20 is below the minimum 0x40");
  }
  SECTION("payload past the fatbin end") {
    CHECK(first_error(patched(good, 16 + 8, 0x200, 8)) == "t.fatbin: fatbin 0 entry 0 at 0x18: payload size 0x200 runs past the fatbin end 0x58");
  }
  SECTION("payload size overflowing 64 bits") {
    CHECK(first_error(patched(good, 16 + 8, UINT64_MAX, 8)).find("runs past the fatbin end") != std::string::npos);
  }
  SECTION("unknown kind") {
    CHECK(first_error(patched(good, 16, 0x33, 2)).find("unknown image kind 0x33") != std::string::npos);
  }
  SECTION("compressed without an uncompressed size") {
    CHECK(first_error(patched(good, 16 + 0x28, 0x8011, 8)).find("uncompressed size of 0") != std::string::npos);
  }
  SECTION("identifier outside the entry") {
    Buf b = good;
    put_at(b, 16 + 0x20, 0x40, 4);
    put_at(b, 16 + 0x24, 0x100, 4);
    CHECK(first_error(b).find("identifier at +0x40 of 0x100 bytes runs past the entry end +0x48") != std::string::npos);
  }
  SECTION("entry header cut by the fatbin end") {
    Buf b = good;
    put_at(b, 8, 0x20, 8);  // the fatbin now ends inside the entry header
    b.resize(16 + 0x20);
    CHECK(first_error(b).find("entry header of 0x40 bytes runs past the fatbin end 0x30") != std::string::npos);
  }
  SECTION("every truncation fails cleanly") {
    for (std::size_t cut = 1; cut < good.size(); ++cut) {
      Buf b(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
      INFO("cut " << cut);
      CHECK(first_error(b) != "ok");
    }
  }
}

TEST_CASE("lz4 and zstd payloads decompress, within limits", "[fatbin]") {
  const Buf text = bytes_of(kPtx + kPtx + kPtx);
  Buf lz(static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(text.size()))));
  const int lz_n = LZ4_compress_default(reinterpret_cast<const char*>(text.data()), reinterpret_cast<char*>(lz.data()),
                                        static_cast<int>(text.size()), static_cast<int>(lz.size()));
  REQUIRE(lz_n > 0);
  lz.resize(static_cast<std::size_t>(lz_n));
  Buf zs(ZSTD_compressBound(text.size()));
  const std::size_t zs_n = ZSTD_compress(zs.data(), zs.size(), text.data(), text.size(), 3);
  REQUIRE(ZSTD_isError(zs_n) == 0);
  zs.resize(zs_n);

  EntrySpec l = spec(1, 80, 0x2011, 9, 0, lz, static_cast<std::uint32_t>(lz.size()), text.size());
  EntrySpec z = spec(1, 90, 0x8011, 9, 0, zs, static_cast<std::uint32_t>(zs.size()), text.size());
  EntrySpec zs_nolen = z;  // exact compressed length absent: the frame is measured
  zs_nolen.compressed = 0;
  const Buf fatbin_bytes = make_fatbin({l, z, zs_nolen});  // the entries point into it
  auto r = Fatbin::parse_all(fatbin_bytes, "c.fatbin");
  REQUIRE(r.ok());
  const auto& entries = r->front().entries;
  CHECK(entries[0].compression == Compression::lz4);
  CHECK(entries[1].compression == Compression::zstd);
  for (const auto& e : entries) {
    auto out = decompress(e, "c.fatbin");
    REQUIRE(out.ok());
    CHECK(*out == text);
    auto k = list_kernels(e, *out, "c.fatbin");
    REQUIRE(k.ok());
    REQUIRE(k->size() == 6);
    CHECK((*k)[0].name == "_Z5scalePfi");
    CHECK((*k)[0].demangled == "scale(float*, int)");
    CHECK((*k)[1].name == "plain_c_kernel");
  }
  SECTION("a claimed size above the limit is refused before allocating") {
    auto out = decompress(entries[1], "c.fatbin", 16);
    REQUIRE_FALSE(out.ok());
    CHECK(out.message().find("claimed uncompressed size 0x") != std::string::npos);
    CHECK(out.message().find("exceeds the limit 0x10") != std::string::npos);
  }
  SECTION("sizes inconsistent with the header are refused") {
    FatbinEntry e = entries[0];
    e.uncompressed_size = text.size() + 1;
    auto out = decompress(e, "c.fatbin");
    REQUIRE_FALSE(out.ok());
    CHECK(out.message().find("c.fatbin: entry 0 at 0x10: lz4 payload decompresses to") != std::string::npos);
    FatbinEntry f = entries[1];
    f.uncompressed_size = text.size() - 1;
    auto out2 = decompress(f, "c.fatbin");
    REQUIRE_FALSE(out2.ok());
    CHECK(out2.message().find("zstd frame holds") != std::string::npos);
  }
}

TEST_CASE("a zstd frame decoded in steps leaves no window in the thread's decoder", "[fatbin][decode]") {
  // 6 MiB of PTX (one .entry, then comments) compresses about 1000 times: above the ratio a
  // vector is sized for at once. Compressed in steps with an 8 MiB window and no stated size,
  // the decoder must stream it and allocate a window; afterwards the thread's decoder holds
  // only its tables again, for decompress() and for decode_kernels() alike.
  std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry big_kernel()\n{\nret;\n}\n";
  while (ptx.size() < (std::size_t{6} << 20)) ptx += "// padding line that repeats, compressing very well\n";
  const Buf text = bytes_of(ptx);
  auto compress = [&](bool stated) {
    std::unique_ptr<ZSTD_CCtx, std::size_t (*)(ZSTD_CCtx*)> c(ZSTD_createCCtx(), ZSTD_freeCCtx);
    REQUIRE(ZSTD_isError(ZSTD_CCtx_setParameter(c.get(), ZSTD_c_windowLog, 23)) == 0);
    REQUIRE(ZSTD_isError(ZSTD_CCtx_setParameter(c.get(), ZSTD_c_contentSizeFlag, stated ? 1 : 0)) == 0);
    if (stated) REQUIRE(ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(c.get(), text.size())) == 0);
    Buf out(ZSTD_compressBound(text.size()));
    ZSTD_inBuffer in{text.data(), text.size(), 0};
    ZSTD_outBuffer o{out.data(), out.size(), 0};
    REQUIRE(ZSTD_compressStream2(c.get(), &o, &in, ZSTD_e_end) == 0);
    out.resize(o.pos);
    return out;
  };
  const Buf streamed = compress(false), stated = compress(true);
  REQUIRE(streamed.size() * 500 < text.size());
  EntrySpec a = spec(1, 90, 0x8011, 9, 0, streamed, static_cast<std::uint32_t>(streamed.size()), text.size());
  EntrySpec b = spec(1, 90, 0x8011, 9, 0, stated, static_cast<std::uint32_t>(stated.size()), text.size());
  const Buf fatbin_bytes = make_fatbin({a, b});
  auto r = Fatbin::parse_all(fatbin_bytes, "w.fatbin");
  REQUIRE(r.ok());
  for (const auto& e : r->front().entries) {
    INFO("entry " << e.index);
    auto out = decompress(e, "w.fatbin");
    REQUIRE(out.ok());
    CHECK(*out == text);
    CHECK(zstd_decoder_bytes() < (std::size_t{1} << 20));
    auto k = decode_kernels(e, "w.fatbin");
    REQUIRE(k.ok());
    REQUIRE(k->size() == 1);
    CHECK((*k)[0].name == "big_kernel");
    CHECK(zstd_decoder_bytes() < (std::size_t{1} << 20));
  }
}

TEST_CASE("kernels of a cubin are its CUDA entry symbols", "[fatbin]") {
  // A cubin whose ELF header is valid but whose symbol table is absent lists no kernel;
  // one that is not ELF at all is an error naming the entry.
  EntrySpec s = spec(2, 80, 0x11, 1, 8, bytes_of("definitely not elf"));
  const Buf fatbin_bytes = make_fatbin({s});  // the entries point into it
  auto r = Fatbin::parse_all(fatbin_bytes, "k.fatbin");
  REQUIRE(r.ok());
  const auto& e = r->front().entries[0];
  auto k = list_kernels(e, e.payload, "k.fatbin");
  REQUIRE_FALSE(k.ok());
  CHECK(k.message().find("k.fatbin: entry 0 at 0x10: cubin") != std::string::npos);
  CHECK(k.message().find("not an elf file") != std::string::npos);
}

TEST_CASE("demangling and cuobjdump names", "[fatbin]") {
  CHECK(demangle("_ZN7fixture5scaleIfEEvT_PS1_i") == "void fixture::scale<float>(float, float*, int)");
  CHECK(demangle("plain") == "plain");
  CHECK(demangle("_Znot valid") == "_Znot valid");
  CHECK(cuobjdump_base("/usr/lib/libcublasLt.so.13") == "libcublasLt.so");
  CHECK(cuobjdump_base("app") == "app");
  CHECK(cuobjdump_base("dir.d/file") == "file");
  FatbinEntry e;
  e.kind = CodeKind::sass;
  e.arch = Arch{100, Suffix::f};
  CHECK(cuobjdump_name(e, "libx", 3) == "libx.3.sm_100.cubin");  // f dropped for ELF
  e.kind = CodeKind::ptx;
  CHECK(cuobjdump_name(e, "libx", 1) == "libx.1.sm_100f.ptx");  // kept for PTX
  e.arch = Arch{90, Suffix::a};
  e.kind = CodeKind::sass;
  CHECK(cuobjdump_name(e, "libx", 2) == "libx.2.sm_90a.cubin");
  e.identifier = "/src/kernels.cu";
  CHECK(cuobjdump_name(e, "libx", 2) == "kernels.sm_90a.cubin");
}

TEST_CASE("scan_bytes reads raw fatbins and rejects other bytes", "[fatbin]") {
  const Buf fb = make_fatbin({EntrySpec{}});
  auto r = scan_bytes(fb, "mem.fatbin");
  REQUIRE(r.ok());
  REQUIRE(r->objects.size() == 1);
  CHECK(r->objects[0].fatbins.size() == 1);
  const Buf junk = bytes_of("hello world, not a binary");
  auto bad = scan_bytes(junk, "notes.txt");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message() ==
        "notes.txt: not an elf file, a fatbin or a supported archive (ar, zip, tar), nor a ptx or lto-ir file");
  auto missing = scan_path("/nonexistent/lib.so");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message().find("/nonexistent/lib.so: cannot open") == 0);
}

TEST_CASE("embedded fatbins: found only after strict validation, at 8-aligned addresses", "[fatbin][embedded]") {
  const Buf good = make_fatbin({EntrySpec{}, spec(1, 90, 0x11, 9, 0, bytes_of(".version 9.0\n"))});
  Buf region(40, std::byte{0x5a});  // unrelated data
  auto append = [&region](const Buf& b) {
    while (region.size() % 8 != 0) region.push_back(std::byte{0x5a});
    const std::size_t at = region.size();
    region.insert(region.end(), b.begin(), b.end());
    return at;
  };
  append(good);                              // found
  append(patched(good, 4, 2, 2));            // fatbin version 2
  append(patched(good, 6, 0x20, 2));         // header size 0x20
  append(patched(good, 16, 0x33, 2));        // unknown entry kind
  append(patched(good, 18, 0x0102, 2));      // entry version
  append(patched(good, 8, good.size(), 8));  // fat size: entries do not fill it
  append(patched(good, 20, 0x44, 4));        // entry header size not a multiple of 8
  append(patched(good, 16 + 0x1c, 0, 4));    // architecture 0: passes the quick test, refused by the parser
  region.push_back(std::byte{0x5a});         // an unaligned copy (offset % 8 == 1)
  region.insert(region.end(), good.begin(), good.end());
  const std::size_t second = append(good);  // found
  const Buf tail = {std::byte{0x50}, std::byte{0xed}, std::byte{0x55}, std::byte{0xba}, std::byte{1}};
  append(tail);  // magic at the very end

  const auto found = find_embedded_fatbins(region, "lib.so", ".rodata", 0x1000);
  REQUIRE(found.size() == 2);
  CHECK(found[0].offset == 0x1000 + 40);
  CHECK(found[0].section == FatbinSection::embedded);
  CHECK(found[0].section_name == ".rodata");
  CHECK(found[0].entries.size() == 2);
  CHECK(found[0].entries[0].offset == 0x1000 + 40 + 16);
  CHECK(found[1].index == 1);
  CHECK(found[1].offset == 0x1000 + second);

  // The alignment is of the address: a section at file offset 4 mod 8 (cuFFT's .ldata) can hold
  // aligned fatbins.
  Buf shifted(4, std::byte{0});
  shifted.insert(shifted.end(), good.begin(), good.end());
  CHECK(find_embedded_fatbins(shifted, "lib.so", ".ldata", 0, 0).empty());
  CHECK(find_embedded_fatbins(shifted, "lib.so", ".ldata", 0, 4).size() == 1);
}

TEST_CASE("embedded fatbins: random data full of the magic yields none and no error", "[fatbin][embedded]") {
  std::mt19937_64 rng(20261130);
  Buf noise(std::size_t{1} << 20);
  for (auto& b : noise) b = static_cast<std::byte>(rng() & 0xff);
  for (std::size_t at = 0; at + 16 <= noise.size(); at += 512) {
    put_at(noise, at, kFatbinMagic, 4);
    if (at % 1024 == 0) {  // a plausible header: version 1, 16 bytes, random size
      put_at(noise, at + 4, 1, 2);
      put_at(noise, at + 6, 16, 2);
      put_at(noise, at + 8, rng() % 0x400, 8);
    }
  }
  CHECK(find_embedded_fatbins(noise, "noise.bin", ".rodata").empty());
  const Buf only_magic = {std::byte{0x50}, std::byte{0xed}, std::byte{0x55}, std::byte{0xba}};
  CHECK(find_embedded_fatbins(only_magic, "tiny", ".rodata").empty());
  CHECK(find_embedded_fatbins(Buf{}, "empty", ".rodata").empty());
}

TEST_CASE("embedded fatbins: a search on several threads finds exactly what one thread finds", "[fatbin][embedded]") {
  // The parallel search cuts the region into chunks (C below), handed out in runs (two chunks each
  // with 2 threads and 17 chunks), searched from each run's start: a search that begins inside a
  // fatbin must not report what lies inside it. Fatbins across chunk boundaries, fatbins nested
  // in the payload of a larger one, one of them running past the larger one's end, and one
  // larger fatbin spanning a whole chunk.
  const auto C = static_cast<std::size_t>(embedded_scan_chunk_bytes());
  REQUIRE(C >= (std::size_t{1} << 20));
  const Buf small = make_fatbin({EntrySpec{}, spec(1, 90, 0x11, 9, 0, bytes_of(".version 9.0\n"))});
  Buf region(17 * C, std::byte{0x5a});
  auto put_bytes = [&region](std::size_t at, const Buf& b) {
    REQUIRE(at % 8 == 0);
    REQUIRE(at + b.size() <= region.size());
    std::copy(b.begin(), b.end(), region.begin() + static_cast<std::ptrdiff_t>(at));
    return at;
  };
  // A fatbin of one image from `at` to `end`, its payload filler.
  auto big = [&](std::size_t at, std::size_t end) {
    return put_bytes(at, make_fatbin({spec(2, 90, 0x11, 1, 8, Buf(end - at - 16 - 0x40, std::byte{0x5a}))}));
  };
  std::vector<std::size_t> expected = {put_bytes(0x100, small), put_bytes(C - 48, small), put_bytes(C + 0x1000, small)};
  // [2 C - 0x800, 3 C - 8): its chunk-2 nested fatbins are found by a search from 2 C; the
  // last one starts 16 bytes before its end and runs into chunk 3, so that search goes on past
  // a fatbin the sequential one finds (at 3 C + 0x40, inside the overlapping one's payload).
  expected.push_back(big(2 * C - 0x800, 3 * C - 8));
  put_bytes(2 * C + 0x10000, small);
  put_bytes(2 * C + 0x80000, small);
  big(3 * C - 24, 3 * C + 0x228);
  expected.push_back(put_bytes(3 * C + 0x40, small));
  expected.push_back(put_bytes(3 * C + 0x400, small));
  expected.push_back(put_bytes(4 * C, small));  // at a chunk's first byte
  // [6 C - 0x100, 7 C + 0x1000): chunk 6 lies wholly inside it, and so do two nested ones.
  expected.push_back(big(6 * C - 0x100, 7 * C + 0x1000));
  put_bytes(6 * C + 0x20000, small);
  put_bytes(7 * C + 0x100, small);
  expected.push_back(put_bytes(7 * C + 0x1000, small));                            // right after it
  expected.push_back(put_bytes(region.size() - small.size() / 8 * 8 - 8, small));  // ends near the region's end
  REQUIRE(small.size() % 8 == 0);

  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    INFO(threads << " threads");
    const auto found = find_embedded_fatbins(region, "lib.so", ".rodata", 0x1000, 0, {}, {}, threads);
    std::vector<std::size_t> at;
    for (const auto& fb : found) at.push_back(static_cast<std::size_t>(fb.offset - 0x1000));
    CHECK(at == expected);
    for (std::size_t i = 0; i < found.size(); ++i) {
      CHECK(found[i].index == i);
      CHECK(found[i].section_name == ".rodata");
      CHECK(found[i].entries.size() == (found[i].size > C ? 1u : 2u));  // the big ones have one image
    }
  }
  // The same bytes 4 bytes into a section at address 4 mod 8: the chunks start at the aligned addresses.
  Buf shifted(4, std::byte{0x5a});
  shifted.insert(shifted.end(), region.begin(), region.end());
  for (unsigned threads : {1u, 2u}) {
    std::vector<std::size_t> at;
    for (const auto& fb : find_embedded_fatbins(shifted, "lib.so", ".ldata", 0, 4, {}, {}, threads))
      at.push_back(static_cast<std::size_t>(fb.offset) - 4);
    CHECK(at == expected);
  }
}

TEST_CASE("standalone PTX and LTO-IR files", "[fatbin][standalone]") {
  const Buf ptx = bytes_of("/* header */\n// comment\n\n" + kPtx.substr(3));  // .version 9.0 / .target sm_80
  CHECK(classify_device_file(ptx) == DeviceFileKind::ptx);
  auto fb = read_standalone(ptx, "k.ptx");
  REQUIRE(fb.ok());
  CHECK(fb->section == FatbinSection::standalone);
  REQUIRE(fb->entries.size() == 1);
  const FatbinEntry& e = fb->entries[0];
  CHECK(e.kind == CodeKind::ptx);
  CHECK(e.arch == Arch{80, Suffix::none});
  CHECK(e.version == Version2{9, 0});
  CHECK(e.payload.size() == ptx.size());
  auto k = list_kernels(e, e.payload, "k.ptx");
  REQUIRE(k.ok());
  CHECK(k->size() == 2);

  const Buf ptx_f = bytes_of(".version 8.8\n.target sm_100f, debug\n.address_size 64\n");
  auto f = read_standalone(ptx_f, "f.ptx");
  REQUIRE(f.ok());
  CHECK(f->entries[0].arch == Arch{100, Suffix::f});
  CHECK((f->entries[0].flags & kEntryFlagFamilySpecific) != 0);

  auto bad = read_standalone(bytes_of(".version 9.0\n.target sm_999\n"), "bad.ptx");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message() == "bad.ptx: ptx .target at 0x0: 'sm_999' names no architecture");
  CHECK(classify_device_file(bytes_of(".version 9.0\n.address_size 64\n")) == DeviceFileKind::none);
  CHECK(classify_device_file(bytes_of("int main() {}\n.version 9.0\n.target sm_80\n")) == DeviceFileKind::none);
  CHECK(classify_device_file(bytes_of("hello")) == DeviceFileKind::none);

  Buf lto(0x40, std::byte{0});
  put_at(lto, 0, 0x7f4e43ed, 4);
  put_at(lto, 0x1a, 900, 2);
  CHECK(classify_device_file(lto) == DeviceFileKind::ltoir);
  auto l = read_standalone(lto, "k.ltoir");
  REQUIRE(l.ok());
  CHECK(l->entries[0].kind == CodeKind::ltoir);
  CHECK(l->entries[0].arch == Arch{90, Suffix::none});
  put_at(lto, 0x1a, 905, 2);
  auto lbad = read_standalone(lto, "odd.ltoir");
  REQUIRE_FALSE(lbad.ok());
  CHECK(lbad.message() == "odd.ltoir: lto-ir header at 0x1a: architecture 0x389 is not an sm number x 10");

  auto sc = scan_bytes(ptx, "k.ptx");
  REQUIRE(sc.ok());
  REQUIRE(sc->objects.size() == 1);
  CHECK(sc->objects[0].fatbins[0].section == FatbinSection::standalone);
}

TEST_CASE("standalone cubins: the architecture from e_flags, ELF ABI v7 and v8", "[fatbin][standalone]") {
  // A bare ELF64 header (no section table) with e_machine EM_CUDA.
  auto cubin = [](std::uint8_t abi, std::uint32_t flags) {
    Buf b(64, std::byte{0});
    put_at(b, 0, 0x464c457f, 4);  // \x7fELF
    b[4] = std::byte{2};          // ELFCLASS64
    b[5] = std::byte{1};          // little endian
    b[6] = std::byte{1};
    b[7] = abi == 7 ? std::byte{0x33} : std::byte{0x41};
    b[8] = std::byte{abi};
    put_at(b, 16, 2, 2);    // ET_EXEC
    put_at(b, 18, 190, 2);  // EM_CUDA
    put_at(b, 48, flags, 4);
    return b;
  };
  auto arch_of = [](const Buf& b) {
    auto fb = read_standalone(b, "k.cubin");
    REQUIRE(fb.ok());
    REQUIRE(fb->entries.size() == 1);
    CHECK(fb->entries[0].kind == CodeKind::sass);
    CHECK(fb->entries[0].payload.size() == b.size());
    return fb->entries[0].arch;
  };
  CHECK(classify_device_file(cubin(8, 0x6005a04)) == DeviceFileKind::cubin);
  CHECK(arch_of(cubin(8, 0x6005a04)) == Arch{90, Suffix::none});   // nvcc 13.0 -cubin -arch=sm_90
  CHECK(arch_of(cubin(8, 0x6007802)) == Arch{120, Suffix::none});  // sm_120
  CHECK(arch_of(cubin(7, 0x500550)) == Arch{80, Suffix::none});    // CUDA 12: SM in bits 7:0
  CHECK(arch_of(cubin(7, 0x5a0d5a)) == Arch{90, Suffix::a});       // 0x800: sm_90a
  // ptxas 12.8/12.9 (ABI v8) marked "a" with e_flags bit 0x8 and wrote no .nv.compat record 9:
  // the values of flashinfer-cubin 0.6.13's cubins.
  CHECK(arch_of(cubin(8, 0x600640a)) == Arch{100, Suffix::a});     // fmhaSm100aKernel_...
  CHECK(arch_of(cubin(8, 0x1000670c)) == Arch{103, Suffix::a});    // fmhaSm103aKernel_...
  CHECK(arch_of(cubin(8, 0x6006402)) == Arch{100, Suffix::none});  // its sm_100f ones: no trace
  CHECK(read_standalone(cubin(8, 0x6005a04), "k.cubin")->entries[0].version == Version2{1, 8});
  auto bad = read_standalone(cubin(8, 0x6000004), "zero.cubin");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message() == "zero.cubin: cubin e_flags at 0x30: value 0x6000004 (elf abi 8) names no architecture (sm 0)");
  Buf host = cubin(8, 0);
  put_at(host, 18, 62, 2);  // x86-64: not device code by itself
  CHECK(classify_device_file(host) == DeviceFileKind::none);
}

TEST_CASE("errors carry a kind, and the native number beside it", "[fatbin][errors]") {
  // Bytes that stop inside the first entry header: corrupt, no native number.
  Buf truncated = make_fatbin({spec(1, 80, 0x11, 9, 0, bytes_of(kPtx))});
  truncated.resize(16 + 0x20);
  auto bad = Fatbin::parse_all(truncated, "short.fatbin");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.kind() == ErrorKind::corrupt);
  CHECK(bad.code() == 0);
  CHECK(bad.message().rfind("short.fatbin: ", 0) == 0);

  // A file that is not there: not_found, with errno ENOENT beside it.
  auto missing = map_file("/nonexistent-archguard-dir/none.so");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.kind() == ErrorKind::not_found);
  CHECK(missing.code() == ENOENT);
  CHECK(missing.message() == "/nonexistent-archguard-dir/none.so: cannot open: No such file or directory");

  // A directory named as a file: a well-formed input this reader does not handle.
  auto dir = map_file("/");
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.kind() == ErrorKind::unsupported);

  // An image larger than the caller's limit: limit, not corrupt (the bytes may be fine).
  const Buf fb = make_fatbin({spec(1, 80, 0x11, 9, 0, bytes_of(kPtx))});
  auto fbs = Fatbin::parse_all(fb, "big.fatbin");
  REQUIRE(fbs.ok());
  REQUIRE(fbs->size() == 1);
  REQUIRE(fbs->front().entries.size() == 1);
  auto payload = decompress(fbs->front().entries.front(), "big.fatbin", 8);
  REQUIRE_FALSE(payload.ok());
  CHECK(payload.kind() == ErrorKind::limit);

  // A token the grammar does not know: usage.
  auto token = parse_token("sm_9x");
  REQUIRE_FALSE(token.ok());
  CHECK(token.kind() == ErrorKind::usage);

  CHECK(to_string(ErrorKind::not_found) == "not_found");
  CHECK(to_string(ErrorKind::nvrtc) == "nvrtc");
}

TEST_CASE("symbol_table reads the fields of every entry and only the names asked for", "[fatbin][elf]") {
  // .symtab (section 2) names .strtab (section 3): a file symbol, a local object, and a global
  // function whose name offset runs past the string table (a damaged entry).
  Buf shstr(1, std::byte{0});
  const std::uint32_t n_symtab = add_name(shstr, ".symtab");
  const std::uint32_t n_strtab = add_name(shstr, ".strtab");
  Buf strtab(1, std::byte{0});
  const std::uint32_t n_file = add_name(strtab, "kernels.cu");
  const std::uint32_t n_data = add_name(strtab, "fatbinData");
  Buf symtab(24, std::byte{0});
  auto sym = [&](std::uint32_t name, unsigned char info, std::uint16_t shndx, std::uint64_t value) {
    const Elf64_Sym s{name, info, 0, shndx, value, 0};
    const auto* b = reinterpret_cast<const std::byte*>(&s);  // a plain struct's bytes
    symtab.insert(symtab.end(), b, b + sizeof s);
  };
  sym(n_file, STT_FILE, SHN_ABS, 0);
  sym(n_data, STT_OBJECT, 1, 0x40);
  sym(0x7fff, (STB_GLOBAL << 4) | STT_FUNC, 1, 0x80);
  const Buf file = make_elf(shstr, {Sec{n_symtab, SHT_SYMTAB, 0, 0, symtab, 3, 24}, Sec{n_strtab, SHT_STRTAB, 0, 0, strtab}});
  auto elf = ElfFile::parse(file, "syms.o");
  REQUIRE(elf.ok());
  auto all = elf->symbols();
  REQUIRE_FALSE(all.ok());  // the damaged name is read, and refused
  CHECK_THAT(all.message(), Catch::Contains("syms.o: symbol name") && Catch::Contains("runs past the string table end"));
  auto table = elf->symbol_table();
  REQUIRE(table.ok());
  REQUIRE(table->size() == 4);  // the null symbol, the file, the object, the damaged function
  CHECK(table->info(1) == STT_FILE);
  CHECK(table->shndx(2) == 1);
  CHECK(table->value(2) == 0x40);
  CHECK(table->info(3) == ((STB_GLOBAL << 4) | STT_FUNC));
  CHECK(table->fields(3).value == 0x80);
  CHECK(table->fields(3).name.empty());  // fields() reads no name: the damaged one goes unnoticed
  auto null_sym = table->symbol(0);
  REQUIRE(null_sym.ok());
  CHECK(null_sym->name.empty());
  auto file_sym = table->symbol(1);
  REQUIRE(file_sym.ok());
  CHECK(file_sym->name == "kernels.cu");
  CHECK(file_sym->type() == STT_FILE);
  auto data = table->symbol(2);
  REQUIRE(data.ok());
  CHECK(data->name == "fatbinData");
  CHECK(data->value == 0x40);
  auto damaged = table->symbol(3);
  REQUIRE_FALSE(damaged.ok());
  CHECK_THAT(damaged.message(), Catch::Contains("syms.o: symbol name") && Catch::Contains("runs past the string table end"));
}
