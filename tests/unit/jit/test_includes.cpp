// SPDX-License-Identifier: Apache-2.0
// The include scan behind the JIT cache key (src/jit/includes.cpp) on hostile sources: its work
// is bounded by a counter (IncludeScan::work), never by wall time, and `#if 0` is not followed.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "jit/includes.hpp"

using namespace archguard;
using namespace archguard::jit;
using namespace archguard::jit::detail;
namespace fs = std::filesystem;

namespace {

// A name whose directory does not exist: nothing on disk is found for "..." includes.
constexpr const char* kName = "/nonexistent-archguard-include-test/big.cu";

bool has_location(const IncludeScan& s, const std::string& location) {
  return std::any_of(s.deps.begin(), s.deps.end(), [&](const IncludeDep& d) { return d.location == location; });
}

bool has_spelling(const IncludeScan& s, const std::string& spelling) {
  return std::any_of(s.deps.begin(), s.deps.end(), [&](const IncludeDep& d) { return d.spelling == spelling; });
}

}  // namespace

TEST_CASE("thousands of computed includes are keyed in linear work", "[jit][hostile][includes]") {
  // The worst case of the old scan: many definitions, many computed includes that resolve and
  // many that never do. It went over every unresolved include in every round (18 s for 323 KB).
  constexpr int kN = 5000;
  CompileRequest r;
  r.name = kName;
  for (int i = 0; i < kN; ++i) {
    const std::string n = std::to_string(i);
    r.source += "#define M" + n + " \"h" + n + ".h\"\n#include M" + n + "\n#include U" + n + "\n";
    r.headers.push_back({"h" + n + ".h", "\n"});
  }
  REQUIRE(r.source.size() > 100000);
  const IncludeScan s = scan_includes(r);
  for (int i = 0; i < kN; i += 499) CHECK(has_location(s, "provided:h" + std::to_string(i) + ".h"));
  CHECK_FALSE(s.complete);
  CHECK(s.note.find("computed #include U0 at " + std::string(kName) + ":3 could not be resolved") != std::string::npos);
  // A step per definition, per computed include and per definition tried: about 4 per line group.
  CHECK(s.work <= std::uint64_t{4} * kN + 16);
}

TEST_CASE("a chain of headers each defining the next computed include stays linear", "[jit][hostile][includes]") {
  // Header i defines the macro that names header i + 1: the old scan needed a round per link,
  // each over every unresolved computed include (rounds x unresolved).
  constexpr int kChain = 2000, kUnresolved = 2000;
  CompileRequest r;
  r.name = kName;
  r.source = "#define C0 \"c0.h\"\n#include C0\n";
  for (int j = 0; j < kUnresolved; ++j) r.source += "#include U" + std::to_string(j) + "\n";
  for (int i = 0; i < kChain; ++i) {
    const std::string next = std::to_string(i + 1);
    r.headers.push_back({"c" + std::to_string(i) + ".h", "#define C" + next + " \"c" + next + ".h\"\n#include C" + next + "\n"});
  }
  const IncludeScan s = scan_includes(r);
  for (int i = 0; i < kChain; i += 199) CHECK(has_location(s, "provided:c" + std::to_string(i) + ".h"));
  CHECK(has_spelling(s, "\"c" + std::to_string(kChain) + ".h\""));  // the last link resolves nowhere
  CHECK_FALSE(s.complete);
  CHECK(s.work <= std::uint64_t{3} * (kChain + 1) + kUnresolved + 16);
}

TEST_CASE("one macro defined and used thousands of times costs one try per definition", "[jit][hostile][includes]") {
  constexpr int kN = 3000;
  CompileRequest r;
  r.name = kName;
  for (int i = 0; i < kN; ++i) r.source += "#define H \"v" + std::to_string(i) + ".h\"\n#include H\n";
  const IncludeScan s = scan_includes(r);
  CHECK(s.complete);
  CHECK(has_spelling(s, "\"v0.h\""));
  CHECK(has_spelling(s, "\"v" + std::to_string(kN - 1) + ".h\""));
  CHECK(s.work <= std::uint64_t{3} * kN + 16);
}

TEST_CASE("includes and definitions inside #if 0 are not followed", "[jit][includes]") {
  CompileRequest r;
  r.name = kName;
  r.source =
      "#if 0\n#include \"dead.h\"\n#define X \"dead2.h\"\n#if FOO\n#else\n#include \"dead3.h\"\n#endif\n#endif\n"
      "#include X\n"
      "#if 0 /* comment */\n#include <dead4.h>\n#elif BAR\n#include \"live1.h\"\n#endif\n"
      "#if 0\n#else\n#include \"live2.h\"\n#endif\n"
      "#if 1\n#include \"live3.h\"\n#endif\n"
      "#ifdef NEVER\n#include \"live4.h\"\n#endif\n"
      "#if 00\n#include \"live5.h\"\n#endif\n";
  const IncludeScan s = scan_includes(r);
  for (const char* dead : {"\"dead.h\"", "\"dead2.h\"", "\"dead3.h\"", "<dead4.h>"}) CHECK_FALSE(has_spelling(s, dead));
  // Any other condition may hold: its includes count (live5: only a literal 0 is skipped).
  for (const char* live : {"\"live1.h\"", "\"live2.h\"", "\"live3.h\"", "\"live4.h\"", "\"live5.h\""}) CHECK(has_spelling(s, live));
  CHECK_FALSE(s.complete);  // X was defined only under #if 0
  CHECK(s.note.find("computed #include X at " + std::string(kName) + ":9") != std::string::npos);
}

TEST_CASE("the header size limit of the scan is an option", "[jit][hostile][includes]") {
  const fs::path dir = fs::temp_directory_path() / ("archguard-includes-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string header = (dir / "two-k.h").string();
  { std::ofstream(header) << std::string(2048, ' ') << '\n'; }
  CompileRequest r;
  r.name = (dir / "k.cu").string();
  r.source = "#include \"two-k.h\"\n";
  const IncludeScan small = scan_includes(r, 1024);
  CHECK_FALSE(small.complete);
  CHECK(small.note.find("two-k.h is larger than 1024 bytes and not read for the key") != std::string::npos);
  const IncludeScan fits = scan_includes(r);
  CHECK(fits.complete);
  CHECK(has_location(fits, header));
  fs::remove_all(dir);
}
