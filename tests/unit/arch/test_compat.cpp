// SPDX-License-Identifier: Apache-2.0
// Every rule of docs/architectures.md ("Will this binary run on that GPU?") and every row
// measured on the H200 (CC 9.0, driver 580.159.04, CUDA 13.0), as unit tests.
#include <archguard/compat.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>

using namespace archguard;

namespace {

constexpr Version2 kIsa90{9, 0};
constexpr DriverVersion kH200Driver{580, 159, 4};

// The images a target list produces (PTX at the given ISA), in the order written.
std::vector<Image> images(std::string_view targets, Version2 isa = kIsa90) {
  Result<std::vector<Target>> t = parse_list(targets);
  INFO(targets << ": " << (t ? "" : t.message()));
  REQUIRE(t.ok());
  std::vector<Image> out;
  for (const Target& x : *t) {
    Image im;
    im.kind = x.kind;
    im.arch = x.arch;
    if (x.kind == CodeKind::ptx) im.ptx_isa = isa;
    out.push_back(im);
  }
  return out;
}

Image sass(unsigned sm, Suffix s = Suffix::none) { return Image{CodeKind::sass, {sm, s}, {}, false, false}; }
Image ptx(unsigned sm, Version2 isa = kIsa90, Suffix s = Suffix::none) {
  return Image{CodeKind::ptx, {sm, s}, isa, false, false};
}

const Device kH200 = device_for_cc({9, 0});

std::string picked(std::span<const Image> ims, const Verdict& v) {
  REQUIRE(v.image.has_value());
  return nvcc_name(ims[*v.image].arch, ims[*v.image].kind);
}

}  // namespace

TEST_CASE("rule 1: SASS runs on later minors of its major, never across majors", "[compat]") {
  CHECK(sass_runs_on({80}, device_for_cc({8, 0})));
  CHECK(sass_runs_on({80}, device_for_cc({8, 6})));
  CHECK(sass_runs_on({80}, device_for_cc({8, 9})));
  CHECK_FALSE(sass_runs_on({80}, device_for_cc({9, 0})));
  CHECK_FALSE(sass_runs_on({86}, device_for_cc({8, 0})));  // not backwards
  CHECK_FALSE(sass_runs_on({90}, device_for_cc({10, 0})));
  CHECK(sass_runs_on({100}, device_for_cc({10, 3})));
  CHECK(sass_runs_on({120}, device_for_cc({12, 1})));
  CHECK_FALSE(sass_runs_on({100}, device_for_cc({12, 0})));
}

TEST_CASE("rule 1: Tegra parts are excluded from minor-version compatibility", "[compat]") {
  for (Version2 cc : {Version2{5, 3}, Version2{6, 2}, Version2{7, 2}, Version2{8, 7}}) {
    INFO("cc " << cc.major << "." << cc.minor);
    const Device d = device_for_cc(cc);
    CHECK(d.tegra);
    CHECK(sass_runs_on({cc.packed()}, d));          // exact match still runs
    CHECK_FALSE(sass_runs_on({cc.major * 10}, d));  // X.0 SASS does not reach the Tegra part
  }
  CHECK_FALSE(sass_runs_on({87}, device_for_cc({8, 9})));  // nor Tegra SASS a desktop part
  // A device flagged Tegra by the caller is treated as one even for an unknown CC.
  CHECK_FALSE(sass_runs_on({80}, Device{{8, 5}, true}));
  CHECK(sass_runs_on({80}, Device{{8, 5}, false}));
}

TEST_CASE("Jetson builds: Tegra SASS runs on its own CC only, and a 209 names the fix", "[compat][tegra]") {
  const Device orin = device_for_cc({8, 7});
  const Device rtx3090 = device_for_cc({8, 6});
  const std::vector<Image> orin_build = images("sm_87,compute_87");

  CHECK(select_image(orin_build, orin).outcome == Outcome::native);
  const Verdict on86 = select_image(orin_build, rtx3090);
  CHECK(on86.outcome == Outcome::fail);
  CHECK(on86.cuda_error == 209);
  CHECK_THAT(on86.reason, Catch::Contains("cc 8.7 is a tegra part (no minor-version compatibility)"));
  CHECK_THAT(on86.reason, Catch::Contains("fix: rebuild with sass sm_86 (add 86 to ARCH_POLICY) or with ptx compute_86 or lower"));
  // An RTX 30xx build does not reach Orin either: the device is the Tegra part this time.
  const Verdict desktop_on_orin = select_image(images("sm_86"), orin);
  CHECK(desktop_on_orin.cuda_error == 209);
  CHECK_THAT(desktop_on_orin.reason, Catch::Contains("sass of cc 8.6 does not run on cc 8.7 because cc 8.7 is a tegra part"));
  CHECK_THAT(desktop_on_orin.reason, Catch::Contains("fix: rebuild with sass sm_87"));
  // Thor (CC 11.0) JITs the Orin build's PTX; without PTX it fails.
  CHECK(select_image(orin_build, device_for_cc({11, 0})).outcome == Outcome::jit);
  CHECK(select_image(images("sm_87"), device_for_cc({11, 0})).cuda_error == 209);
  // A desktop miss names the fix but no Tegra reason.
  const Verdict a100_on_h200 = select_image(images("sm_80"), kH200);
  CHECK_THAT(a100_on_h200.reason, Catch::Contains("fix: rebuild with sass sm_90"));
  CHECK_THAT(a100_on_h200.reason, !Catch::Contains("tegra"));
  // The pre-13.0 Thor name keeps its own hint (rebuild with 110), not a second fix.
  const Verdict sm101_on_thor = select_image(images("sm_101"), device_for_cc({11, 0}));
  CHECK_THAT(sm101_on_thor.reason, Catch::Contains("rebuild with 110"));
  CHECK_THAT(sm101_on_thor.reason, !Catch::Contains("fix:"));
}

TEST_CASE("Grace Hopper build (sm_90a + compute_90): native on 9.0, JIT on 10.0, 209 on 8.0", "[compat]") {
  const std::vector<Image> gh200 = images("sm_90a,compute_90");
  CHECK(select_image(gh200, kH200).outcome == Outcome::native);
  CHECK(select_image(gh200, device_for_cc({10, 0})).outcome == Outcome::jit);
  const Verdict a100 = select_image(gh200, device_for_cc({8, 0}));
  CHECK(a100.cuda_error == 209);
  CHECK_THAT(a100.reason, Catch::Contains("fix: rebuild with sass sm_80"));
}

TEST_CASE("rule 2: PTX JITs for any device of SM >= its arch", "[compat]") {
  CHECK(ptx_targets({80}, kH200));
  CHECK(ptx_targets({90}, kH200));
  CHECK_FALSE(ptx_targets({100}, kH200));
  CHECK(ptx_targets({75}, device_for_cc({12, 1})));
  CHECK(ptx_targets({80}, device_for_cc({8, 7})));  // JIT knows no Tegra exception
}

TEST_CASE("rule 3: 'a' runs only on exactly its CC", "[compat]") {
  CHECK(sass_runs_on({90, Suffix::a}, kH200));
  CHECK_FALSE(sass_runs_on({100, Suffix::a}, device_for_cc({10, 3})));
  CHECK_FALSE(sass_runs_on({90, Suffix::a}, device_for_cc({10, 0})));
  CHECK(ptx_targets({90, Suffix::a}, kH200));
  CHECK_FALSE(ptx_targets({90, Suffix::a}, device_for_cc({10, 0})));
  CHECK_FALSE(ptx_targets({120, Suffix::a}, device_for_cc({12, 1})));
}

TEST_CASE("rule 4: 'f' runs on the family at or above its minor", "[compat]") {
  // ptxas 13.0: 100f -> 10.0, 10.3; 103f -> 10.3; 110f -> 11.0; 120f -> 12.0, 12.1; 121f -> 12.1.
  auto family = [](unsigned sm) {
    std::vector<unsigned> out;
    for (Version2 cc : loads_on({{sm, Suffix::f}, CodeKind::sass})) out.push_back(cc.packed());
    return out;
  };
  CHECK(family(100) == std::vector<unsigned>{100, 103});
  CHECK(family(103) == std::vector<unsigned>{103});
  CHECK(family(110) == std::vector<unsigned>{110});
  CHECK(family(120) == std::vector<unsigned>{120, 121});
  CHECK(family(121) == std::vector<unsigned>{121});
  CHECK_FALSE(sass_runs_on({100, Suffix::f}, device_for_cc({12, 0})));
  CHECK(ptx_targets({120, Suffix::f}, device_for_cc({12, 1})));
  CHECK_FALSE(ptx_targets({120, Suffix::f}, device_for_cc({10, 0})));
}

TEST_CASE("rule 5: SASS over PTX, 'a' over plain, highest SASS, highest usable PTX", "[compat]") {
  SECTION("sass over ptx") {
    const std::vector<Image> ims = images("sm_80 compute_90");
    const Verdict v = select_image(ims, kH200, {kH200Driver});
    CHECK(v.outcome == Outcome::jit);  // sm_80 does not run on 9.0: JIT compute_90
    const std::vector<Image> ims2 = images("sm_90 compute_90");
    const Verdict v2 = select_image(ims2, kH200, {kH200Driver});
    CHECK(v2.outcome == Outcome::native);
    CHECK(picked(ims2, v2) == "sm_90");
  }
  SECTION("'a' over plain of the same arch, whatever the order") {
    std::vector<Image> ims{sass(90, Suffix::a), sass(90)};
    CHECK(picked(ims, select_image(ims, kH200)) == "sm_90a");
    std::reverse(ims.begin(), ims.end());
    CHECK(picked(ims, select_image(ims, kH200)) == "sm_90a");
  }
  SECTION("highest compatible SASS among several") {
    const std::vector<Image> ims = images("sm_80 sm_86 sm_89 sm_90");
    const Verdict v = select_image(ims, device_for_cc({8, 9}));
    CHECK(v.outcome == Outcome::native);
    CHECK(picked(ims, v) == "sm_89");
    const Verdict v86 = select_image(ims, device_for_cc({8, 6}));
    CHECK(picked(ims, v86) == "sm_86");
    const std::vector<Image> b = images("sm_100 sm_100f sm_103");
    CHECK(picked(b, select_image(b, device_for_cc({10, 3}))) == "sm_103");
    CHECK(picked(b, select_image(b, device_for_cc({10, 0}))) == "sm_100f");
  }
  SECTION("highest usable PTX when it must JIT") {
    const std::vector<Image> ims = images("compute_75 compute_80 compute_100");
    const Verdict v = select_image(ims, kH200, {kH200Driver});
    CHECK(v.outcome == Outcome::jit);
    CHECK(picked(ims, v) == "compute_80");
    // A newer ISA than the driver knows makes that PTX unusable: the next one is taken.
    std::vector<Image> isa{ptx(75, {9, 0}), ptx(80, {9, 1})};
    const Verdict vi = select_image(isa, kH200, {kH200Driver});
    CHECK(vi.outcome == Outcome::jit);
    CHECK(picked(isa, vi) == "compute_75");
  }
}

TEST_CASE("rule 6: PTX ISA newer than the driver's gives 222", "[compat]") {
  std::vector<Image> ims{ptx(80, {9, 1})};
  const Verdict v = select_image(ims, kH200, {kH200Driver});
  CHECK(v.outcome == Outcome::fail);
  CHECK(v.cuda_error == kErrUnsupportedPtx);
  CHECK(v.reason.find("9.1") != std::string::npos);
  CHECK(v.reason.find("9.0") != std::string::npos);
  // Driver 580 accepts ISA 9.0 (measured).
  ims[0].ptx_isa = {9, 0};
  CHECK(select_image(ims, kH200, {kH200Driver}).outcome == Outcome::jit);
  // An older driver rejects it.
  const Verdict old = select_image(ims, kH200, {DriverVersion{570, 26, 0}});
  CHECK(old.cuda_error == kErrUnsupportedPtx);
  // Unknown driver: the ISA is not limited.
  CHECK(select_image(ims, kH200).outcome == Outcome::jit);
  // SASS that runs makes the ISA irrelevant.
  std::vector<Image> mixed{sass(90), ptx(90, {9, 1})};
  CHECK(select_image(mixed, kH200, {kH200Driver}).outcome == Outcome::native);
}

TEST_CASE("rule 7: no loadable image gives 209", "[compat]") {
  const std::vector<Image> ims = images("sm_80");
  const Verdict v = select_image(ims, kH200, {kH200Driver});
  CHECK(v.outcome == Outcome::fail);
  CHECK(v.cuda_error == kErrNoKernelImage);
  CHECK_FALSE(v.image.has_value());
  CHECK(v.reason.find("sm_80") != std::string::npos);
  CHECK(select_image(std::vector<Image>{}, kH200).cuda_error == kErrNoKernelImage);
  // LTO-IR never loads directly.
  const std::vector<Image> lto = images("-gencode=arch=compute_90,code=lto_90");
  CHECK(select_image(lto, kH200).cuda_error == kErrNoKernelImage);
}

TEST_CASE("rule 8: relocatable PTX counts, a SASS-only -rdc mismatch gives 500", "[compat]") {
  Image rel = ptx(80);
  rel.relocatable = true;
  std::vector<Image> ims{sass(80), rel};
  const Verdict v = select_image(ims, kH200, {kH200Driver});
  CHECK(v.outcome == Outcome::jit);
  CHECK(*v.image == 1);
  CHECK(v.reason.find("relocatable") != std::string::npos);
  Image rsass = sass(80);
  rsass.relocatable = true;
  std::vector<Image> only{rsass, sass(80)};
  const Verdict f = select_image(only, kH200, {kH200Driver});
  CHECK(f.cuda_error == kErrSymbolNotFound);
  // Non-rdc SASS-only mismatch stays 209.
  std::vector<Image> plain{sass(80)};
  CHECK(select_image(plain, kH200).cuda_error == kErrNoKernelImage);
}

TEST_CASE("rule 9: the device-link fatbin decides nothing", "[compat]") {
  Image dlink = sass(90);
  dlink.device_link = true;
  std::vector<Image> ims{dlink, sass(80)};
  const Verdict v = select_image(ims, kH200, {kH200Driver});
  CHECK(v.cuda_error == kErrNoKernelImage);  // sm_90 in the device-link fatbin does not help
  std::vector<Image> ok{dlink, sass(90)};
  const Verdict w = select_image(ok, kH200);
  CHECK(w.outcome == Outcome::native);
  CHECK(*w.image == 1);
  std::vector<Image> alone{dlink};
  CHECK(select_image(alone, kH200).reason.find("device-link") != std::string::npos);
}

TEST_CASE("CUDA_FORCE_PTX_JIT ignores SASS, 209 without usable PTX", "[compat]") {
  DriverSettings force{kH200Driver, true, false};
  const std::vector<Image> both = images("sm_90 compute_90");
  const Verdict v = select_image(both, kH200, force);
  CHECK(v.outcome == Outcome::jit);
  CHECK(picked(both, v) == "compute_90");
  CHECK(v.reason.find("CUDA_FORCE_PTX_JIT") != std::string::npos);
  const std::vector<Image> sass_only = images("sm_90");
  CHECK(select_image(sass_only, kH200, force).cuda_error == kErrNoKernelImage);  // measured
  std::vector<Image> new_isa{sass(90), ptx(90, {9, 1})};
  CHECK(select_image(new_isa, kH200, force).cuda_error == kErrUnsupportedPtx);
}

TEST_CASE("CUDA_DISABLE_PTX_JIT: 223 when only PTX is usable", "[compat]") {
  DriverSettings off{kH200Driver, false, true};
  const std::vector<Image> p = images("compute_80");
  const Verdict v = select_image(p, kH200, off);
  CHECK(v.cuda_error == kErrJitDisabled);  // measured
  CHECK(v.reason.find("CUDA_DISABLE_PTX_JIT") != std::string::npos);
  const std::vector<Image> s = images("sm_90 compute_90");
  CHECK(select_image(s, kH200, off).outcome == Outcome::native);
  const std::vector<Image> none = images("sm_80 compute_100");
  CHECK(select_image(none, kH200, off).cuda_error == kErrNoKernelImage);  // nothing to JIT anyway
}

TEST_CASE("sm_101 was renamed sm_110 in CUDA 13.0", "[compat]") {
  const std::vector<Image> old = images("sm_101");
  // Jetson Thor under a pre-13.0 driver reports CC 10.1 and runs sm_101.
  CHECK(select_image(old, device_for_cc({10, 1}), {DriverVersion{575, 51, 3}}).outcome == Outcome::native);
  // Under a CUDA 13.0 driver the same part reports CC 11.0: sm_101 no longer loads.
  const Verdict v = select_image(old, device_for_cc({10, 1}), {DriverVersion{580, 65, 6}});
  CHECK(v.cuda_error == kErrNoKernelImage);
  CHECK(v.reason.find("renamed sm_110") != std::string::npos);
  const Verdict w = select_image(old, device_for_cc({11, 0}));
  CHECK(w.cuda_error == kErrNoKernelImage);
  CHECK(w.reason.find("rebuild with 110") != std::string::npos);
  const std::vector<Image> now = images("sm_110");
  CHECK(select_image(now, device_for_cc({10, 1}), {DriverVersion{580, 65, 6}}).outcome == Outcome::native);
  // PTX of 10.1 still JITs on the renamed part (SM 110 >= 101).
  const std::vector<Image> p = images("compute_101");
  CHECK(select_image(p, device_for_cc({11, 0}), {kH200Driver}).outcome == Outcome::jit);
}

TEST_CASE("measured on the H200: nvcc 13.0 saxpy builds", "[compat][h200]") {
  const DriverSettings drv{kH200Driver};
  struct Row {
    const char* built_with;
    Outcome outcome;
    int error;
    const char* image;
  };
  const Row rows[] = {
      {"-gencode arch=compute_80,code=sm_80", Outcome::fail, kErrNoKernelImage, ""},
      {"-gencode arch=compute_80,code=compute_80", Outcome::jit, 0, "compute_80"},
      {"-gencode arch=compute_80,code=[sm_80,compute_80]", Outcome::jit, 0, "compute_80"},
      {"-arch=sm_90", Outcome::native, 0, "sm_90"},
      {"-arch=sm_90a", Outcome::native, 0, "sm_90a"},
      {"-arch=sm_100", Outcome::fail, kErrNoKernelImage, ""},
      {"-gencode arch=compute_100,code=[sm_100,compute_100]", Outcome::fail, kErrNoKernelImage, ""},
      // -arch=all-major: SASS 75 80 90 100 110 120 + compute_120 PTX.
      {"sm_75 sm_80 sm_90 sm_100 sm_110 sm_120 compute_120", Outcome::native, 0, "sm_90"},
      // No arch given: sm_75 + compute_75.
      {"-arch=sm_75", Outcome::jit, 0, "compute_75"},
  };
  for (const Row& r : rows) {
    INFO(r.built_with);
    const std::vector<Image> ims = images(r.built_with);
    const Verdict v = select_image(ims, kH200, drv);
    CHECK(v.outcome == r.outcome);
    CHECK(v.cuda_error == r.error);
    CHECK_FALSE(v.reason.empty());
    if (r.outcome != Outcome::fail) CHECK(picked(ims, v) == r.image);
  }
}

TEST_CASE("every verdict carries a one-sentence lower-case reason", "[compat]") {
  const std::vector<Image> sets[] = {images("sm_80"), images("sm_90"), images("compute_80"), images("sm_90a"),
                                     std::vector<Image>{ptx(80, {9, 1})}};
  for (const std::vector<Image>& ims : sets) {
    for (DriverSettings s : {DriverSettings{kH200Driver}, DriverSettings{kH200Driver, true, false},
                             DriverSettings{kH200Driver, false, true}}) {
      const Verdict v = select_image(ims, kH200, s);
      REQUIRE_FALSE(v.reason.empty());
      CHECK(v.reason.back() != '.');
      CHECK(v.reason.find(". ") == std::string::npos);
      CHECK(std::islower(static_cast<unsigned char>(v.reason.front())));
      CHECK((v.outcome == Outcome::fail) == (v.cuda_error != 0));
      CHECK((v.outcome == Outcome::fail) != v.image.has_value());
    }
  }
}

TEST_CASE("device_for_cc and loads_on read the table", "[compat]") {
  CHECK(device_for_cc({8, 7}).tegra);
  CHECK_FALSE(device_for_cc({8, 6}).tegra);
  CHECK_FALSE(device_for_cc({9, 9}).tegra);
  std::vector<unsigned> sm80;
  for (Version2 cc : loads_on({{80}, CodeKind::sass})) sm80.push_back(cc.packed());
  CHECK(sm80 == std::vector<unsigned>{80, 86, 88, 89});  // not 8.7 (Tegra)
  CHECK(loads_on({{90}, CodeKind::ltoir}).empty());
  CHECK(loads_on({{120}, CodeKind::ptx}).size() == 2);
}

TEST_CASE("explain_target is generated from the table", "[compat]") {
  CHECK(explain_target({{100, Suffix::a}, CodeKind::sass}) ==
        "SASS for CC 10.0 only (B200, GB200); does not run on CC 10.3 (B300, GB300) and CC 10.7; use 100f to cover the "
        "family; nvcc accepts it since CUDA 12.8");
  const std::string s90a = explain_target({{90, Suffix::a}, CodeKind::sass});
  CHECK(s90a.find("SASS for CC 9.0 only (H100, H200, GH200)") == 0);
  const std::string s101 = explain_target({{101}, CodeKind::sass});
  CHECK(s101.find("renamed sm_110 in CUDA 13.0") != std::string::npos);
  const std::string s80 = explain_target({{80}, CodeKind::sass});
  CHECK(s80.find("also runs on CC 8.6") != std::string::npos);
  CHECK(s80.find("does not run on CC 8.9") == std::string::npos);
  const std::string s70 = explain_target({{70}, CodeKind::sass});
  CHECK(s70.find("removed") != std::string::npos);
}

TEST_CASE("an architecture the table lacks is inferred conservatively", "[compat][table]") {
  // sm_109 stands for the next architecture a newer nvcc lists before the table has its row.
  const Arch a109{109};
  REQUIRE(arch_inferred(a109));
  REQUIRE_FALSE(arch_inferred(Arch{107}));
  CHECK(sass_runs_on(a109, Device{{10, 9}, false}));         // exactly its CC
  CHECK_FALSE(sass_runs_on(a109, Device{{10, 10}, false}));  // never beyond: it may be a Tegra part
  CHECK_FALSE(sass_runs_on(a109, Device{{11, 0}, false}));   // never across majors
  CHECK(sass_runs_on({109, Suffix::f}, Device{{10, 9}, false}));
  CHECK_FALSE(sass_runs_on({109, Suffix::f}, Device{{12, 0}, false}));  // family unknown
  CHECK(ptx_targets(a109, Device{{12, 0}, false}));                     // PTX: CC >= 10.9
  CHECK_FALSE(ptx_targets(a109, Device{{10, 3}, false}));
  const std::vector<Version2> on = loads_on({a109, CodeKind::sass});
  CHECK(on == std::vector<Version2>{{10, 9}});
  CHECK(explain_target({a109, CodeKind::sass}).find("(inferred: not in the architecture table)") != std::string::npos);
  const std::string note = inferred_arch_note(a109);
  CHECK(note.find("sm_109 is not in the architecture table: assuming CC 10.9") == 0);
  CHECK(note.find("nearest known: sm_107, sm_110") != std::string::npos);
  CHECK(note.find("architectures.txt") != std::string::npos);
  // A typo is still a typo: no plausible capability.
  CHECK_FALSE(parse_token("896").ok());
  CHECK(parse_token("sm_109").ok());
}

TEST_CASE("a PTX ISA newer than the table needs a driver the table does not know", "[compat][table]") {
  const Version2 newest = newest_known_ptx_isa();
  CHECK(newest >= Version2{9, 5});
  const Version2 next{newest.major, newest.minor + 1};
  CHECK(min_driver_for_ptx_isa(next).empty());
  CHECK(min_driver_for_ptx_isa({9, 0}) == "580.65.06");
  const std::vector<Image> images{ptx(75, next)};
  DriverSettings s;
  s.driver = DriverVersion{999, 0, 0};
  // A driver of a newer branch than any the table records: acceptance cannot be judged, and an
  // unknown is not called a failure (it says so in the reason).
  Verdict v = select_image(images, device_for_cc({9, 0}), s);
  CHECK(v.outcome == Outcome::jit);
  CHECK(v.reason.find("cannot be judged here") != std::string::npos);
  // A driver of a recorded branch (580.x is CUDA 13.0's) is judged: it rejects the newer ISA.
  s.driver = DriverVersion{580, 200, 0};
  v = select_image(images, device_for_cc({9, 0}), s);
  CHECK(v.outcome == Outcome::fail);
  CHECK(v.cuda_error == kErrUnsupportedPtx);
  CHECK(v.reason.find("newer than every cuda release in the architecture table") != std::string::npos);
  // CUDA 13.5's PTX ISA 9.5 under driver 580.159.04 (measured: 222 on an H200).
  s.driver = DriverVersion{580, 159, 4};
  v = select_image(std::vector<Image>{ptx(75, {9, 5})}, device_for_cc({9, 0}), s);
  CHECK(v.cuda_error == kErrUnsupportedPtx);
  CHECK(v.reason.find("accepts at most 9.0") != std::string::npos);
  // A driver older than every recorded release (400.10 < CUDA 11.0's 450.51.05): said so, with
  // the oldest release's minimum, instead of "accepts at most unknown".
  s.driver = DriverVersion{400, 10, 0};
  v = select_image(std::vector<Image>{ptx(75, {7, 0})}, device_for_cc({9, 0}), s);
  CHECK(v.cuda_error == kErrUnsupportedPtx);
  CHECK(v.reason.find("unknown") == std::string::npos);
  CHECK(v.reason.find("driver 400.10 is older than the minimum driver of every cuda release in the architecture table "
                      "(the oldest, cuda 11.0, needs 450.51.05)") != std::string::npos);
}
