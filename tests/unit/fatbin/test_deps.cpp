// SPDX-License-Identifier: Apache-2.0
// The dependency walk (deps.hpp) over synthetic ELF files written to a temporary directory:
// each file has only what ld.so reads (a dynamic section and its strings), so every search rule
// can be set up exactly.
#include <archguard/deps.hpp>

#include <archguard/container.hpp>

#include <catch2/catch.hpp>

#include "skip.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

// The fixtures are written as designated initializers ({.needed = ..., .runpath = ...}); the
// members left out take their default member initializers, which is what this GCC warning
// (unlike Clang's) does not take into account.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

using namespace archguard;
namespace fs = std::filesystem;

namespace {

struct Dyn {
  std::vector<std::string> needed;
  std::string rpath, runpath, soname;
  bool has_rpath = false, has_runpath = false;
  std::uint16_t machine = kElfMachineX86_64;
  std::vector<std::uint8_t> rodata;  ///< an extra allocated read-only section when not empty
  std::uint16_t type = kElfTypeDyn;
  std::uint64_t flags1 = 0;  ///< DT_FLAGS_1 when not zero (0x08000000: DF_1_PIE)
};

void put16(std::vector<std::uint8_t>& b, std::size_t at, std::uint16_t v) { std::memcpy(b.data() + at, &v, 2); }
void put32(std::vector<std::uint8_t>& b, std::size_t at, std::uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put64(std::vector<std::uint8_t>& b, std::size_t at, std::uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

/// An ELF64 file: header, .dynstr, .dynamic, [.rodata], .shstrtab, section table.
std::vector<std::uint8_t> make_elf(const Dyn& d) {
  std::string dynstr(1, '\0');
  auto add = [&](const std::string& s) {
    const auto off = dynstr.size();
    dynstr += s;
    dynstr += '\0';
    return static_cast<std::uint64_t>(off);
  };
  std::vector<std::pair<std::uint64_t, std::uint64_t>> dyn;
  for (const auto& n : d.needed) dyn.emplace_back(1, add(n));
  if (!d.soname.empty()) dyn.emplace_back(14, add(d.soname));
  if (d.has_rpath) dyn.emplace_back(15, add(d.rpath));
  if (d.has_runpath) dyn.emplace_back(29, add(d.runpath));
  if (d.flags1 != 0) dyn.emplace_back(0x6ffffffb, d.flags1);
  dyn.emplace_back(0, 0);
  const std::string shstr = std::string("\0.dynstr\0.dynamic\0.shstrtab\0.rodata\0", 36);
  std::vector<std::uint8_t> b(64, 0);
  auto align8 = [&] { b.resize((b.size() + 7) & ~std::size_t{7}, 0); };
  const std::size_t dynstr_off = b.size();
  b.insert(b.end(), dynstr.begin(), dynstr.end());
  align8();
  const std::size_t dynamic_off = b.size();
  b.resize(b.size() + dyn.size() * 16);
  for (std::size_t i = 0; i < dyn.size(); ++i) {
    put64(b, dynamic_off + i * 16, dyn[i].first);
    put64(b, dynamic_off + i * 16 + 8, dyn[i].second);
  }
  align8();
  const std::size_t rodata_off = b.size();
  b.insert(b.end(), d.rodata.begin(), d.rodata.end());
  align8();
  const std::size_t shstr_off = b.size();
  b.insert(b.end(), shstr.begin(), shstr.end());
  align8();
  const std::size_t shoff = b.size();
  const std::size_t nsec = d.rodata.empty() ? 4 : 5;
  b.resize(b.size() + nsec * 64, 0);
  auto section = [&](std::size_t i, std::uint32_t name, std::uint32_t type, std::uint64_t flags, std::size_t off,
                     std::size_t size, std::uint32_t link) {
    const std::size_t h = shoff + i * 64;
    put32(b, h, name);
    put32(b, h + 4, type);
    put64(b, h + 8, flags);
    put64(b, h + 24, off);
    put64(b, h + 32, size);
    put32(b, h + 40, link);
  };
  section(1, 1, 3, 2, dynstr_off, dynstr.size(), 0);
  section(2, 9, 6, 3, dynamic_off, dyn.size() * 16, 1);
  section(3, 18, 3, 0, shstr_off, shstr.size(), 0);
  if (!d.rodata.empty()) section(4, 28, 1, 2, rodata_off, d.rodata.size(), 0);
  const std::uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  std::memcpy(b.data(), ident, sizeof ident);
  put16(b, 16, d.type);
  put16(b, 18, d.machine);
  put32(b, 20, 1);
  put64(b, 40, shoff);
  put16(b, 52, 64);
  put16(b, 58, 64);
  put16(b, 60, static_cast<std::uint16_t>(nsec));
  put16(b, 62, 3);
  return b;
}

struct TempDir {
  fs::path root;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "archguard-deps-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    root = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  std::string write(const std::string& rel, const Dyn& d) const {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    const auto bytes = make_elf(d);
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
  std::string dir(const std::string& rel) const { return (root / rel).string(); }
};

/// No environment, no system cache, no default directories: only what a test sets up.
DependencyOptions isolated() {
  DependencyOptions o;
  o.ld_library_path = std::vector<std::string>{};
  o.ld_so_cache = "";
  o.default_dirs = std::vector<std::string>{};
  return o;
}

const Dependency* find(const DependencyWalk& w, const std::string& needed) {
  for (const auto& d : w.libraries)
    if (d.needed == needed) return &d;
  return nullptr;
}

}  // namespace

TEST_CASE("DT_RUNPATH with $ORIGIN finds a library beside the executable", "[fatbin][deps]") {
  TempDir t;
  const std::string app = t.write("bin/app", {.needed = {"libk.so"}, .runpath = "$ORIGIN/../lib", .has_runpath = true, .type = kElfTypeExec});
  const std::string lib = t.write("lib/libk.so", {.needed = {"libinner.so"}, .runpath = "${ORIGIN}/inner", .has_runpath = true});
  t.write("lib/inner/libinner.so", {});
  auto w = walk_dependencies(app, isolated());
  REQUIRE(w.ok());
  REQUIRE(w->libraries.size() == 2);
  const Dependency* k = find(*w, "libk.so");
  REQUIRE(k != nullptr);
  CHECK(fs::equivalent(k->path, lib));
  CHECK(k->how == "runpath");
  CHECK(k->depth == 1);
  CHECK(fs::equivalent(k->loaded_by, app));
  const Dependency* inner = find(*w, "libinner.so");
  REQUIRE(inner != nullptr);
  CHECK(inner->loaded_by == k->path);  // named with the object that loaded it
  CHECK(inner->depth == 2);
}

TEST_CASE("an executable's $ORIGIN is where the file really is, a library's where it was found", "[fatbin][deps]") {
  TempDir t;
  // A position-independent executable (ET_DYN + DF_1_PIE) run through a symlink: ld.so takes
  // $ORIGIN from /proc/self/exe, the real file.
  const std::string app = t.write("real/app", {.needed = {"libr.so"}, .runpath = "$ORIGIN", .has_runpath = true, .flags1 = 0x08000000});
  t.write("real/libr.so", {});
  fs::create_directories(t.root / "links");
  fs::create_symlink(app, t.root / "links" / "app");
  auto w = walk_dependencies((t.root / "links" / "app").string(), isolated());
  REQUIRE(w.ok());
  REQUIRE(find(*w, "libr.so") != nullptr);
  CHECK(find(*w, "libr.so")->path == fs::weakly_canonical(t.root / "real").string() + "/libr.so");
  // A shared library (no DF_1_PIE) reached through a symlink keeps the link's directory.
  const std::string lib = t.write("real/libtop.so", {.needed = {"libside.so"}, .runpath = "$ORIGIN", .has_runpath = true});
  t.write("links/libside.so", {});
  fs::create_symlink(lib, t.root / "links" / "libtop.so");
  auto l = walk_dependencies((t.root / "links" / "libtop.so").string(), isolated());
  REQUIRE(l.ok());
  REQUIRE(find(*l, "libside.so") != nullptr);
  CHECK(find(*l, "libside.so")->path == (t.root / "links").string() + "/libside.so");
}

TEST_CASE("DT_RPATH is ignored when DT_RUNPATH is present, used (and inherited) when not", "[fatbin][deps]") {
  TempDir t;
  t.write("a/libx.so", {});
  t.write("b/libx.so", {});
  const std::string both = t.write("both", {.needed = {"libx.so"}, .rpath = t.dir("a"), .runpath = t.dir("b"), .has_rpath = true, .has_runpath = true});
  auto w = walk_dependencies(both, isolated());
  REQUIRE(w.ok());
  REQUIRE(find(*w, "libx.so") != nullptr);
  CHECK(find(*w, "libx.so")->path == t.dir("b") + "/libx.so");
  CHECK(find(*w, "libx.so")->how == "runpath");

  // An executable's DT_RPATH also serves its libraries that have neither (ld.so's loader chain);
  // DT_RUNPATH does not.
  t.write("c/libmid.so", {.needed = {"libleaf.so"}});
  t.write("c/libleaf.so", {});
  const std::string rp = t.write("rp", {.needed = {"libmid.so"}, .rpath = t.dir("c"), .has_rpath = true});
  auto r = walk_dependencies(rp, isolated());
  REQUIRE(r.ok());
  REQUIRE(find(*r, "libleaf.so") != nullptr);
  CHECK(find(*r, "libleaf.so")->how == "rpath");
  const std::string run = t.write("run", {.needed = {"libmid.so"}, .runpath = t.dir("c"), .has_runpath = true});
  auto n = walk_dependencies(run, isolated());
  REQUIRE(n.ok());
  REQUIRE(find(*n, "libleaf.so") != nullptr);
  CHECK(find(*n, "libleaf.so")->path.empty());  // not found: a runpath is not inherited
  CHECK(find(*n, "libleaf.so")->loaded_by == t.dir("c") + "/libmid.so");
}

TEST_CASE("LD_LIBRARY_PATH comes after DT_RPATH and before DT_RUNPATH", "[fatbin][deps]") {
  TempDir t;
  t.write("env/liby.so", {});
  t.write("run/liby.so", {});
  t.write("rp/liby.so", {});
  auto o = isolated();
  o.ld_library_path = std::vector<std::string>{t.dir("nothing"), t.dir("env")};
  const std::string a = t.write("a", {.needed = {"liby.so"}, .runpath = t.dir("run"), .has_runpath = true});
  auto w = walk_dependencies(a, o);
  REQUIRE(w.ok());
  CHECK(find(*w, "liby.so")->path == t.dir("env") + "/liby.so");
  CHECK(find(*w, "liby.so")->how == "LD_LIBRARY_PATH");
  const std::string b = t.write("b", {.needed = {"liby.so"}, .rpath = t.dir("rp"), .has_rpath = true});
  auto v = walk_dependencies(b, o);
  REQUIRE(v.ok());
  CHECK(find(*v, "liby.so")->path == t.dir("rp") + "/liby.so");
}

TEST_CASE("a library of another machine is skipped, as ld.so skips it", "[fatbin][deps]") {
  TempDir t;
  t.write("arm/libz.so", {.machine = kElfMachineAarch64});
  t.write("x86/libz.so", {});
  const std::string app = t.write("app", {.needed = {"libz.so"}, .runpath = t.dir("arm") + ":" + t.dir("x86"), .has_runpath = true});
  auto w = walk_dependencies(app, isolated());
  REQUIRE(w.ok());
  CHECK(find(*w, "libz.so")->path == t.dir("x86") + "/libz.so");
}

TEST_CASE("cycles end and each library is listed once", "[fatbin][deps]") {
  TempDir t;
  t.write("l/liba.so", {.needed = {"libb.so"}, .runpath = "$ORIGIN", .soname = "liba.so", .has_runpath = true});
  t.write("l/libb.so", {.needed = {"liba.so", "libc2.so"}, .runpath = "$ORIGIN", .soname = "libb.so", .has_runpath = true});
  t.write("l/libc2.so", {.needed = {"liba.so", "libb.so"}, .runpath = "$ORIGIN", .has_runpath = true});
  const std::string app = t.write("app", {.needed = {"liba.so", "libb.so"}, .runpath = t.dir("l"), .has_runpath = true});
  auto w = walk_dependencies(app, isolated());
  REQUIRE(w.ok());
  CHECK(w->libraries.size() == 3);
  CHECK(w->problems.empty());

  auto bounded = isolated();
  bounded.max_libraries = 2;
  auto b = walk_dependencies(app, bounded);
  REQUIRE(b.ok());
  CHECK(b->libraries.size() == 2);
  REQUIRE(b->problems.size() == 1);
  CHECK(b->problems[0].find("more than 2 libraries") != std::string::npos);
}

TEST_CASE("the ld.so cache and the default directories come last", "[fatbin][deps]") {
  TempDir t;
  t.write("cached/libq.so.1", {});
  t.write("default/libd.so", {});
  // A cache in glibc's format: header, two entries (an i386 one first, skipped), strings.
  std::vector<std::uint8_t> c(48 + 2 * 24, 0);
  const std::string q_path = t.dir("cached") + "/libq.so.1";
  const std::string strings = std::string("libq.so.1") + '\0' + q_path + '\0' + "/nowhere/libq.so.1" + '\0';
  const std::uint32_t s0 = static_cast<std::uint32_t>(c.size());
  c.insert(c.end(), strings.begin(), strings.end());
  std::memcpy(c.data(), "glibc-ld.so.cache1.1", 20);
  put32(c, 20, 2);
  put32(c, 24, static_cast<std::uint32_t>(strings.size()));
  put32(c, 48, 0x0003);  // ELF libc6, 32-bit: not for x86-64 objects
  put32(c, 52, s0);
  put32(c, 56, s0 + 10 + static_cast<std::uint32_t>(q_path.size()) + 1);
  put32(c, 72, 0x0303);  // ELF libc6, x86-64
  put32(c, 76, s0);
  put32(c, 80, s0 + 10);
  const std::string cache = t.dir("ld.so.cache");
  std::ofstream(cache, std::ios::binary).write(reinterpret_cast<const char*>(c.data()), static_cast<std::streamsize>(c.size()));

  auto o = isolated();
  o.ld_so_cache = cache;
  o.default_dirs = std::vector<std::string>{t.dir("default")};
  const std::string app = t.write("app", {.needed = {"libq.so.1", "libd.so", "libmissing.so"}});
  auto w = walk_dependencies(app, o);
  REQUIRE(w.ok());
  CHECK(find(*w, "libq.so.1")->path == q_path);
  CHECK(find(*w, "libq.so.1")->how == "ld.so.cache");
  CHECK(find(*w, "libd.so")->how == "default");
  CHECK(find(*w, "libmissing.so")->path.empty());

  auto m = map_file(cache);
  REQUIRE(m.ok());
  auto entries = parse_ld_so_cache((*m)->bytes(), cache);
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 2);
  CHECK_FALSE(ld_cache_entry_matches((*entries)[0], kElfMachineX86_64));
  CHECK(ld_cache_entry_matches((*entries)[1], kElfMachineX86_64));
  CHECK_FALSE(ld_cache_entry_matches((*entries)[1], kElfMachineAarch64));

  // Truncated: the message names the file, the offset and the count.
  auto cut = parse_ld_so_cache((*m)->bytes().first(60), "cut.cache");
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.message().find("cut.cache") == 0);
  CHECK(cut.message().find("0x2 entries") != std::string::npos);
  auto bad = parse_ld_so_cache((*m)->bytes().subspan(1), "bad.cache");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().find("bad magic") != std::string::npos);
}

TEST_CASE("this machine's ld.so cache reads and resolves libc", "[fatbin][deps]") {
  if (!fs::exists("/etc/ld.so.cache")) ARCHGUARD_SKIP("no /etc/ld.so.cache on this machine");
  auto m = map_file("/etc/ld.so.cache");
  REQUIRE(m.ok());
  auto entries = parse_ld_so_cache((*m)->bytes(), "/etc/ld.so.cache");
  REQUIRE(entries.ok());
  bool libc = false;
  for (const auto& e : *entries)
    if (e.name == "libc.so.6" && fs::exists(e.path)) libc = true;
  CHECK(libc);
}

TEST_CASE("dynamic string tokens expand as ld.so expands them", "[fatbin][deps]") {
  CHECK(expand_dst("$ORIGIN/lib", "/opt/app", "lib64", "x86_64") == "/opt/app/lib");
  CHECK(expand_dst("${ORIGIN}/../lib", "/opt/app", "lib64", "x86_64") == "/opt/app/../lib");
  CHECK(expand_dst("/usr/$LIB/x/${PLATFORM}", "/o", "lib/x86_64-linux-gnu", "x86_64") == "/usr/lib/x86_64-linux-gnu/x/x86_64");
  CHECK(expand_dst("$ORIGINAL", "/o", "l", "p") == "$ORIGINAL");  // not the ORIGIN token
  CHECK(expand_dst("/plain", "/o", "l", "p") == "/plain");
}

TEST_CASE("objects without device-code sections are recognised without decoding", "[fatbin][deps]") {
  TempDir t;
  auto check = [&](const Dyn& d) {
    const std::string p = t.write("f" + std::to_string(d.rodata.size()), d);
    auto m = map_file(p);
    REQUIRE(m.ok());
    auto e = ElfFile::parse((*m)->bytes(), p);
    REQUIRE(e.ok());
    return may_have_device_code(*e);
  };
  CHECK_FALSE(check({}));
  std::vector<std::uint8_t> data(64, 0x11);
  CHECK_FALSE(check({.rodata = data}));
  data[17] = 0x50;
  data[18] = 0xed;
  data[19] = 0x55;
  data[20] = 0xba;  // unaligned magic
  CHECK_FALSE(check({.rodata = data}));
  data[32] = 0x50;
  data[33] = 0xed;
  data[34] = 0x55;
  data[35] = 0xba;  // a fatbin header, 8-aligned
  data.push_back(0);
  CHECK(check({.rodata = data}));
}
