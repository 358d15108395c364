// SPDX-License-Identifier: Apache-2.0
#include <archguard/arch.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace archguard;

namespace {

struct Case {
  int line = 0;
  std::string dialect, input, expected, message;
};

std::vector<Case> load_corpus() {
  const std::string path = std::string(ARCHGUARD_SOURCE_DIR) + "/tests/data/tokens.txt";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<Case> cases;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    REQUIRE(line.find(';') == std::string::npos);  // the CMake side reads it with file(STRINGS)
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string field;
    while (std::getline(ss, field, '|')) f.push_back(field);
    INFO("tokens.txt:" << n << ": " << line);
    REQUIRE((f.size() == 3 || f.size() == 4));
    cases.push_back({n, f[0], f[1], f[2], f.size() == 4 ? f[3] : ""});
  }
  return cases;
}

std::string comma_form(const std::vector<Target>& t) {
  std::string s = format_targets(t, Dialect::cmake);
  for (char& c : s) {
    if (c == ';') c = ',';
  }
  return s;
}

std::vector<Target> parse_ok(std::string_view s) {
  Result<std::vector<Target>> r = parse_list(s);
  INFO(s << ": " << (r ? std::string("ok") : r.message()));
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("token corpus: every case parses to its canonical form or is rejected", "[arch][tokens]") {
  const std::vector<Case> cases = load_corpus();
  REQUIRE(cases.size() > 100);
  std::size_t errors = 0;
  for (const Case& c : cases) {
    INFO("tokens.txt:" << c.line << ": " << c.dialect << "|" << c.input);
    CHECK((c.dialect == "cmake" || c.dialect == "nvcc" || c.dialect == "torch" || c.dialect == "tf" ||
           c.dialect == "family"));
    Result<std::vector<Target>> r = parse_token(c.input);
    if (c.expected == "INFERRED") {
      REQUIRE(r.ok());
      for (const Target& t : *r) CHECK(arch_inferred(t.arch));
      continue;
    }
    if (c.expected == "ERROR") {
      ++errors;
      REQUIRE_FALSE(r.ok());
      INFO("message: " << r.message());
      CHECK(r.message().find(c.message) != std::string::npos);
      CHECK_FALSE(r.message().empty());
      CHECK(r.message().back() != '.');
    } else {
      INFO((r ? std::string("ok") : r.message()));
      REQUIRE(r.ok());
      CHECK(comma_form(*r) == c.expected);
      // parse_list agrees with parse_token on a single case.
      Result<std::vector<Target>> l = parse_list(c.input);
      REQUIRE(l.ok());
      CHECK(*l == *r);
    }
  }
  CHECK(errors > 30);
}

TEST_CASE("rejections name the reason and the valid neighbours", "[arch][tokens]") {
  Result<std::vector<Target>> r = parse_token("86a");
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "86a: no 'a' variant below 9.0; valid 8.x targets: 80, 86, 87, 88, 89");
  r = parse_token("sm_86a");
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "sm_86a: no 'a' variant below 9.0; valid 8.x targets: sm_80, sm_86, sm_87, sm_88, sm_89");
  r = parse_token("91");  // not in the table, but a plausible capability: inferred (docs/architectures.md)
  REQUIRE(r.ok());
  CHECK(arch_inferred(r->front().arch));
  r = parse_token("896");  // CC 89.6: no plausible capability, a typo
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "896: unknown architecture: there is no compute capability 89.6; nearest valid targets: 121");
  r = parse_token("90f");
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "90f: no 'f' variant below 10.0; valid 9.x targets: 90, 90a");
}

TEST_CASE("basic token spellings", "[arch][tokens]") {
  CHECK(parse_ok("sm_90a") == std::vector<Target>{{{90, Suffix::a}, CodeKind::sass}});
  CHECK(parse_ok("compute_80") == std::vector<Target>{{{80, Suffix::none}, CodeKind::ptx}});
  CHECK(parse_ok("90-real") == std::vector<Target>{{{90, Suffix::none}, CodeKind::sass}});
  CHECK(parse_ok("8.6") == std::vector<Target>{{{86, Suffix::none}, CodeKind::sass}});
  CHECK(parse_ok("lto_100f") == std::vector<Target>{{{100, Suffix::f}, CodeKind::ltoir}});
  CHECK(parse_ok("90") == std::vector<Target>{{{90, Suffix::none}, CodeKind::sass}, {{90, Suffix::none}, CodeKind::ptx}});
  // 100f parses whatever the release; whether an nvcc accepts it is the toolkit's question.
  CHECK(parse_ok("100f").size() == 2);
  CHECK_FALSE(supported_by_release({100, Suffix::f}, {12, 8}));
  // sm_101 still parses: explain and validation report the rename.
  CHECK(parse_ok("sm_101").front().arch.sm == 101);
}

TEST_CASE("nvcc_name and arch_number", "[arch][tokens]") {
  CHECK(nvcc_name({90, Suffix::a}, CodeKind::sass) == "sm_90a");
  CHECK(nvcc_name({120, Suffix::f}, CodeKind::ptx) == "compute_120f");
  CHECK(nvcc_name({80, Suffix::none}, CodeKind::ltoir) == "lto_80");
  CHECK(arch_number({100, Suffix::f}) == "100f");
}

TEST_CASE("format_targets in every dialect", "[arch][tokens]") {
  const std::vector<Target> t = parse_ok("80-real 86 90a-real 100f");
  CHECK(format_targets(t, Dialect::cmake) == "80-real;86;90a-real;100f");
  CHECK(format_targets(t, Dialect::nvcc) ==
        "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_86,code=[sm_86,compute_86] "
        "-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_100f,code=[sm_100f,compute_100f]");
  CHECK(format_targets(t, Dialect::torch) == "8.0;8.6+PTX;9.0a;10.0f+PTX");
  CHECK(format_targets(t, Dialect::tf) == "sm_80,sm_86,compute_86,sm_90a,sm_100f,compute_100f");
  CHECK(format_targets(t, Dialect::codes) == "sm_80;sm_86;compute_86;sm_90a;sm_100f;compute_100f");
  CHECK(check_expressible(t, Dialect::torch).ok());
  // PTX alone: PyTorch cannot say it; LTO-IR: only the gencode form can.
  const std::vector<Target> ptx = parse_ok("90-virtual");
  CHECK_FALSE(check_expressible(ptx, Dialect::torch).ok());
  CHECK(check_expressible(ptx, Dialect::tf).ok());
  const std::vector<Target> lto = parse_ok("lto_90");
  CHECK_FALSE(check_expressible(lto, Dialect::cmake).ok());
  CHECK(check_expressible(lto, Dialect::nvcc).ok());
  CHECK(format_targets(lto, Dialect::nvcc) == "-gencode=arch=compute_90,code=lto_90");
  CHECK(check_expressible(lto, Dialect::codes).ok());  // the CMake module's form: nothing lost
  CHECK(format_targets(lto, Dialect::codes) == "lto_90");
  CHECK(*parse_dialect("gencode") == Dialect::nvcc);
  CHECK(*parse_dialect("TORCH") == Dialect::torch);
  CHECK(*parse_dialect("codes") == Dialect::codes);
  CHECK_FALSE(parse_dialect("bazel").ok());
}

TEST_CASE("round trip: format in a dialect, parse back, same targets", "[arch][tokens]") {
  // Every valid corpus case, in every dialect that can express it exactly.
  for (const Case& c : load_corpus()) {
    if (c.expected == "ERROR" || c.expected == "INFERRED") continue;
    Result<std::vector<Target>> r = parse_token(c.input);
    REQUIRE(r.ok());
    for (Dialect d : {Dialect::cmake, Dialect::nvcc, Dialect::torch, Dialect::tf, Dialect::codes}) {
      if (!check_expressible(*r, d).ok()) continue;
      const std::string text = format_targets(*r, d);
      INFO("tokens.txt:" << c.line << " dialect " << static_cast<int>(d) << ": " << text);
      Result<std::vector<Target>> back = parse_list(text);
      REQUIRE(back.ok());
      CHECK(*back == *r);
    }
  }
  // And every target the table knows, each kind alone.
  for (const ArchRow& row : arch_rows()) {
    for (Suffix s : {Suffix::none, Suffix::a, Suffix::f}) {
      const Arch arch{row.sm, s};
      if (!arch_exists(arch)) continue;
      for (CodeKind k : {CodeKind::sass, CodeKind::ptx, CodeKind::ltoir}) {
        const std::vector<Target> one{{arch, k}};
        Result<std::vector<Target>> back = parse_token(nvcc_name(arch, k));
        REQUIRE(back.ok());
        CHECK(*back == one);
        for (Dialect d : {Dialect::cmake, Dialect::nvcc, Dialect::torch, Dialect::tf, Dialect::codes}) {
          if (!check_expressible(one, d).ok()) continue;
          Result<std::vector<Target>> again = parse_list(format_targets(one, d));
          REQUIRE(again.ok());
          CHECK(*again == one);
        }
      }
    }
  }
}

TEST_CASE("random token soup never crashes and every accepted set round-trips", "[arch][tokens]") {
  // Deterministic: a fixed linear congruential generator over the characters tokens use.
  constexpr std::string_view alphabet = "0123456789.,;[]=-+_ afxsmcomputeltoarchgenPTXHopperTegra\"'";
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::size_t>(state >> 33);
  };
  const char* pieces[] = {"sm_", "compute_", "lto_", "-arch=", "-code=", "-gencode ", "arch=", ",code=",
                          "90", "100", "86", "a", "f", "-real", "-virtual", "+PTX", "8.6", " ", ";", ","};
  std::size_t accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const std::size_t n = next() % 8;
    for (std::size_t k = 0; k < n; ++k) {
      if (next() % 3 == 0) {
        s += alphabet[next() % alphabet.size()];
      } else {
        s += pieces[next() % (sizeof pieces / sizeof pieces[0])];
      }
    }
    Result<std::vector<Target>> r = parse_list(s);
    if (!r) {
      CHECK_FALSE(r.message().empty());
      continue;
    }
    ++accepted;
    INFO("input '" << s << "'");
    REQUIRE_FALSE(r->empty());
    std::vector<Target> sorted = *r;
    canonicalize(sorted);
    CHECK(sorted == *r);
    for (const Target& t : *r) CHECK((arch_exists(t.arch) || arch_inferred(t.arch)));
    Result<std::vector<Target>> back = parse_list(format_targets(*r, Dialect::nvcc));
    REQUIRE(back.ok());
    CHECK(*back == *r);
  }
  CHECK(accepted > 100);
}
