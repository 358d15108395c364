// SPDX-License-Identifier: Apache-2.0
// Coverage logic over hand-made fatbins: which fatbins decide, verify's requirement parsing
// and findings, check's verdicts through select_image, the fleet CSV.
#include <archguard/coverage.hpp>

#include <catch2/catch.hpp>

#include "corpus_lines.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace archguard;

namespace {

// The PTX of hand-made entries defines one kernel (an empty SASS payload does not decode and
// is judged as defining some): a fatbin without kernels decides nothing.
constexpr std::string_view kPtxWithKernel = ".version 9.0\n.target sm_80\n.visible .entry hand_made_kernel()\n{\n ret;\n}\n";

FatbinEntry img(CodeKind kind, unsigned sm, Suffix suffix = Suffix::none, Version2 isa = {9, 0}) {
  FatbinEntry e;
  e.kind = kind;
  if (kind == CodeKind::ptx) {
    e.raw_kind = kEntryKindPtx;
    e.payload = Bytes(reinterpret_cast<const std::byte*>(kPtxWithKernel.data()), kPtxWithKernel.size());
    e.stored_size = kPtxWithKernel.size();
  }
  e.arch = Arch{sm, suffix};
  e.version = kind == CodeKind::ptx ? isa : Version2{1, 8};
  return e;
}

Fatbin fatbin(std::vector<FatbinEntry> entries, FatbinSection section = FatbinSection::nv_fatbin) {
  Fatbin fb;
  fb.section = section;
  for (std::size_t i = 0; i < entries.size(); ++i) entries[i].index = i;
  fb.entries = std::move(entries);
  return fb;
}

ObjectFatbins object(std::string path, std::vector<Fatbin> fbs) {
  ObjectFatbins o;
  o.path = std::move(path);
  for (std::size_t i = 0; i < fbs.size(); ++i) fbs[i].index = i;
  o.fatbins = std::move(fbs);
  return o;
}

Fatbin dlink() {
  Fatbin fb = fatbin({img(CodeKind::sass, 75)});
  fb.linked = true;
  fb.device_link = true;
  return fb;
}

VerifyReport run_verify(const ObjectFatbins& o, std::string_view require, std::string_view ptx = {},
                        bool allow_compatible = false, bool strict = false) {
  auto req = parse_requirement(require, ptx);
  REQUIRE(req.ok());
  req->allow_compatible = allow_compatible;
  req->strict = strict;
  return verify(std::span<const ObjectFatbins>(&o, 1), *req);
}

}  // namespace

TEST_CASE("the device-link fatbin decides nothing, relocatable fatbins decide only alone", "[coverage]") {
  const ObjectFatbins so = object("lib.so", {dlink(), fatbin({img(CodeKind::sass, 80)})});
  auto units = units_of(so);
  REQUIRE(units.size() == 1);
  CHECK(units[0].fatbin->index == 1);
  const CoverageSummary s = summarize(so);
  CHECK(s.sass == std::vector<Arch>{{80, Suffix::none}});  // sm_75 of the device link not counted
  CHECK(s.fatbins == 1);

  const ObjectFatbins rdc_o = object("k.o", {fatbin({img(CodeKind::sass, 80), img(CodeKind::ptx, 80)}, FatbinSection::nv_relfatbin)});
  REQUIRE(units_of(rdc_o).size() == 1);

  Fatbin linked = fatbin({img(CodeKind::sass, 80)});
  linked.linked = true;  // -rdc executable: nvlink's fatbin holds the kernels
  const ObjectFatbins exe = object("app", {linked, fatbin({img(CodeKind::sass, 80), img(CodeKind::ptx, 80)}, FatbinSection::nv_relfatbin)});
  units = units_of(exe);
  REQUIRE(units.size() == 1);
  CHECK(units[0].fatbin->index == 0);
  // Its SASS plus the relocatable images: the PTX the driver may JIT-link (rule 8) and the SASS,
  // which marks a SASS-only -rdc mismatch as 500 rather than 209 (seen on the H200).
  REQUIRE(units[0].images.size() == 3);
  CHECK(units[0].images[1].kind == CodeKind::sass);
  CHECK(units[0].images[1].relocatable);
  CHECK(units[0].images[2].kind == CodeKind::ptx);
  CHECK(units[0].images[2].relocatable);
  CHECK(summarize(exe).highest_ptx_isa == Version2{9, 0});

  const ObjectFatbins sass_only = object("app", {linked, fatbin({img(CodeKind::sass, 80)}, FatbinSection::nv_relfatbin)});
  const ObjectVerdict v = check_object(sass_only, device_for_cc({9, 0}));
  CHECK(v.outcome == Outcome::fail);
  CHECK(v.cuda_error == kErrSymbolNotFound);
}

TEST_CASE("requirement parsing: bare numbers are SASS, CMake lists keep their meaning", "[coverage]") {
  auto r = parse_requirement("75,80,90,120");
  REQUIRE(r.ok());
  CHECK(r->sass.size() == 4);
  CHECK(r->ptx.empty());
  // `text` parses to exactly these sass and ptx architectures.
  const auto check_parsed = [](const std::string& text, const std::vector<Arch>& sass, const std::vector<Arch>& ptx) {
    INFO(text);
    auto p = parse_requirement(text);
    REQUIRE(p.ok());
    CHECK(p->sass == sass);
    CHECK(p->ptx == ptx);
  };
  check_parsed("80-real;90", {{80, Suffix::none}, {90, Suffix::none}}, {{90, Suffix::none}});
  check_parsed("80-real;90-virtual", {{80, Suffix::none}}, {{90, Suffix::none}});
  CHECK(parse_requirement("80-real;90", "none")->ptx.empty());
  CHECK(parse_requirement("80", "highest")->ptx_highest);
  CHECK(parse_requirement("80", "90")->ptx == std::vector<Arch>{{90, Suffix::none}});
  CHECK(parse_requirement("sm_90a")->sass == std::vector<Arch>{{90, Suffix::a}});
  check_parsed("-gencode arch=compute_80,code=[sm_80,compute_80] -gencode arch=compute_90,code=sm_90",
               {{80, Suffix::none}, {90, Suffix::none}}, {{80, Suffix::none}});
  auto bad = parse_requirement("86a");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().starts_with("--require: "));
  CHECK_FALSE(parse_requirement("").ok());
  CHECK_FALSE(parse_requirement("80", "bogus").ok());
}

TEST_CASE("verify names the fatbin and what it lacks", "[coverage]") {
  const ObjectFatbins app = object("app", {dlink(), fatbin({img(CodeKind::sass, 80)}), fatbin({img(CodeKind::sass, 80), img(CodeKind::sass, 90)})});
  const VerifyReport rep = run_verify(app, "80,90");
  CHECK_FALSE(rep.passed());
  REQUIRE(rep.units.size() == 2);
  CHECK(rep.units[0].status == UnitStatus::missing);
  CHECK(rep.units[0].missing_sass == std::vector<Arch>{{90, Suffix::none}});
  CHECK(rep.units[0].message ==
        "app: fatbin 1 has no SASS for sm_90 and no PTX <= 90 (found sm_80); add 90 to ARCH_POLICY or enable PTX");
  CHECK(rep.units[1].status == UnitStatus::ok);
  CHECK(rep.objects == 1);

  SECTION("lower PTX turns the advice into 'JIT at first launch'") {
    const ObjectFatbins o = object("app", {fatbin({img(CodeKind::sass, 80), img(CodeKind::ptx, 80)})});
    const VerifyReport r = run_verify(o, "80,90");
    REQUIRE(r.units.size() == 1);
    CHECK(r.units[0].message ==
          "app: fatbin 0 has no SASS for sm_90 (found sm_80; only compute_80 PTX would be JIT-compiled at first launch); "
          "kernels: hand_made_kernel; add 90 to ARCH_POLICY");
  }
  SECTION("a recorded translation unit is named, with the kernels") {
    ObjectFatbins o = object("app", {fatbin({img(CodeKind::sass, 80), img(CodeKind::ptx, 80)})});
    o.fatbins[0].translation_unit = "old_tu.cu";
    const VerifyReport r = run_verify(o, "90");
    REQUIRE(r.units.size() == 1);
    CHECK(r.units[0].translation_unit == "old_tu.cu");
    CHECK(r.units[0].message.starts_with("app: translation unit old_tu.cu (fatbin 0) has no SASS for sm_90"));
    CHECK(r.units[0].message.find("; kernels: hand_made_kernel;") != std::string::npos);
  }
  SECTION("identifiers name the translation unit") {
    ObjectFatbins o = object("app", {fatbin({img(CodeKind::sass, 80)})});
    o.fatbins[0].entries[0].identifier = "kernels.cu";
    CHECK(run_verify(o, "90").units[0].message.starts_with("app: fatbin 0 (kernels.cu) has no SASS for sm_90"));
  }
  SECTION("--allow-compatible accepts lower SASS of the same major and says so") {
    const ObjectFatbins o = object("app", {fatbin({img(CodeKind::sass, 80)})});
    const VerifyReport r = run_verify(o, "86", {}, true);
    CHECK(r.passed());
    REQUIRE(r.units[0].compatible.size() == 1);
    CHECK(r.units[0].status == UnitStatus::compatible);
    CHECK(r.units[0].message == "app: fatbin 0 uses compatible lower SASS: sm_80 for sm_86");
    CHECK_FALSE(run_verify(o, "90", {}, true).passed());  // never across majors
    CHECK_FALSE(run_verify(o, "86").passed());            // exact by default
  }
  SECTION("fatbins of only a/f images are extras unless --strict") {
    const ObjectFatbins o = object("app", {fatbin({img(CodeKind::sass, 80)}), fatbin({img(CodeKind::sass, 90, Suffix::a)})});
    const VerifyReport r = run_verify(o, "80");
    CHECK(r.passed());
    CHECK(r.units[1].status == UnitStatus::specific_extra);
    CHECK_FALSE(run_verify(o, "80", {}, false, true).passed());
  }
  SECTION("PTX requirements") {
    const ObjectFatbins o = object("app", {fatbin({img(CodeKind::sass, 80), img(CodeKind::sass, 90), img(CodeKind::ptx, 80)})});
    CHECK_FALSE(run_verify(o, "80-real;90").passed());  // CMake '90' wants compute_90
    const VerifyReport h = run_verify(o, "80,90", "highest");
    CHECK_FALSE(h.passed());
    CHECK(h.units[0].missing_ptx_highest);
    CHECK(run_verify(o, "80,90", "80").passed());
    CHECK(run_verify(o, "80-real;90-real").passed());
  }
}

TEST_CASE("check runs select_image on every deciding fatbin and the worst outcome wins", "[coverage]") {
  const ObjectFatbins app = object("app", {dlink(), fatbin({img(CodeKind::sass, 90)}), fatbin({img(CodeKind::sass, 80), img(CodeKind::ptx, 80)})});
  const ObjectVerdict on_h200 = check_object(app, device_for_cc({9, 0}));
  REQUIRE(on_h200.units.size() == 2);
  CHECK(on_h200.units[0].verdict.outcome == Outcome::native);
  CHECK(on_h200.units[1].verdict.outcome == Outcome::jit);
  CHECK(on_h200.outcome == Outcome::jit);
  const ObjectVerdict on_a100 = check_object(app, device_for_cc({8, 0}));
  CHECK(on_a100.outcome == Outcome::fail);  // the sm_90-only fatbin
  CHECK(on_a100.cuda_error == kErrNoKernelImage);
  DriverSettings no_jit;
  no_jit.disable_ptx_jit = true;
  const ObjectVerdict disabled = check_object(app, device_for_cc({9, 0}), no_jit);
  CHECK(disabled.outcome == Outcome::fail);
  CHECK(disabled.cuda_error == kErrJitDisabled);
  DriverSettings old;
  old.driver = DriverVersion{570, 26, 0};  // PTX ISA 8.7 at most
  const ObjectVerdict too_new = check_object(object("p", {fatbin({img(CodeKind::ptx, 80)})}), device_for_cc({9, 0}), old);
  CHECK(too_new.cuda_error == kErrUnsupportedPtx);
  CHECK_FALSE(check_object(object("host-only", {}), device_for_cc({9, 0})).has_device_code());
}

TEST_CASE("fleet CSV from many nodes", "[coverage]") {
  const std::string csv =
      "name, compute_cap\nNVIDIA H100 80GB HBM3, 9.0\nNVIDIA H100 80GB HBM3, 9.0\n\n"
      "name, compute_cap\nTesla T4, 7.5\nNVIDIA GeForce RTX 4060 Ti, 8.9\r\nTesla T4, 7.5\n";
  auto m = parse_fleet_csv(csv, "fleet.csv");
  REQUIRE(m.ok());
  REQUIRE(m->size() == 3);
  CHECK((*m)[0].name == "NVIDIA H100 80GB HBM3");
  CHECK((*m)[0].count == 2);
  CHECK((*m)[1].cc == Version2{7, 5});
  CHECK((*m)[1].count == 2);
  CHECK((*m)[2].cc == Version2{8, 9});
  auto bad = parse_fleet_csv("name, compute_cap\nH100, nine\n", "f.csv");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().rfind("f.csv:2: compute capability 'nine' of 'H100' is not X.Y", 0) == 0);
  CHECK_FALSE(parse_fleet_csv("name, compute_cap\n", "f.csv").ok());
  CHECK_FALSE(parse_fleet_csv("H100, 99999999999999999999.0\n", "f.csv").ok());
}

TEST_CASE("kernel names tagged for an architecture", "[coverage][kernels]") {
  std::string tag;
  CHECK(arch_tag_of("cublasLt_fused_imma_dgemm_kernel_sm100", &tag) == 100);
  CHECK(tag == "sm100");
  CHECK(arch_tag_of("_ZN4xmma6kernelI17sm_90a_hmma_traitsEEvv", &tag) == 90);
  CHECK(tag == "sm_90a");
  CHECK(arch_tag_of("_Z4sm80_xmma_gemm_f16", &tag) == 80);  // after a mangled length
  CHECK(arch_tag_of("volta_cgemm_int8_32x32_cc", &tag) == 70);
  CHECK(tag == "volta");
  CHECK(arch_tag_of("void cutlass::Kernel2<cutlass_70_simt_dgemm_grouped_64x64_8x2_align1>(...)", &tag) == 70);
  CHECK(arch_tag_of("N3cub6Ampere_ffma_traitsE") == 80);
  // Not tags: a word that only contains one, a number that is no architecture, no tag at all.
  CHECK(arch_tag_of("asm80_kernel") == 0);
  CHECK(arch_tag_of("ism_90_thing") == 0);
  CHECK(arch_tag_of("sm_13_legacy") == 0);
  CHECK(arch_tag_of("transvoltage_kernel") == 0);
  CHECK(arch_tag_of("saxpy(float*, float)") == 0);
  CHECK(arch_tag_of("xmma_bn_fprop_stats_kernel") == 0);
}

TEST_CASE("object kinds come from the ELF type and the name", "[coverage][kernels]") {
  ObjectFatbins o = object("dir/libcublasLt.so.13", {fatbin({img(CodeKind::sass, 80)})});
  o.elf_type = 3;
  CHECK(object_kind(o) == ObjectKind::shared_library);
  o.path = "x.whl:cupy/_core/core.cpython-312-x86_64-linux-gnu.so";
  CHECK(object_kind(o) == ObjectKind::shared_library);
  o.path = "build/app";  // a position-independent executable
  CHECK(object_kind(o) == ObjectKind::executable);
  o.path = "build/app.something";
  CHECK(object_kind(o) == ObjectKind::executable);
  o.elf_type = 2;
  CHECK(object_kind(o) == ObjectKind::executable);
  o.elf_type = 1;
  CHECK(object_kind(o) == ObjectKind::relocatable);
}

TEST_CASE("a fatbin that defines no kernel decides nothing", "[coverage][kernels]") {
  static constexpr std::string_view kEmptyPtx = ".version 9.0\n.target sm_75\n.address_size 64\n";
  FatbinEntry stub = img(CodeKind::ptx, 75);
  stub.payload = Bytes(reinterpret_cast<const std::byte*>(kEmptyPtx.data()), kEmptyPtx.size());
  stub.stored_size = kEmptyPtx.size();
  ObjectFatbins o = object("libstub.so", {fatbin({stub})});
  o.elf_type = 3;
  const VerifyReport rep = run_verify(o, "90", "90");
  REQUIRE(rep.units.size() == 1);
  CHECK(rep.units[0].status == UnitStatus::no_kernels);
  CHECK(rep.passed());
  const Device dev = device_for_cc({9, 0});
  DriverSettings no_jit;
  no_jit.disable_ptx_jit = true;  // the stub's verdict fails, yet nothing can fail a launch
  const ObjectVerdict v = check_object(o, dev, no_jit);
  REQUIRE(v.outcome == Outcome::fail);
  const ObjectJudgement j = judge_object(o, v, dev, no_jit);
  CHECK(j.tier == Tier::no_kernels);
  CHECK_FALSE(is_problem(j.tier));
}

TEST_CASE("tiers: every kernel of an object without an image is a failure, not a dispatch", "[coverage][kernels]") {
  ObjectFatbins o = object("libold.so", {fatbin({img(CodeKind::ptx, 100)})});
  o.elf_type = 3;
  const Device dev = device_for_cc({9, 0});
  const ObjectJudgement j = judge_object(o, check_object(o, dev), dev);
  CHECK(j.tier == Tier::none_run);
  CHECK(j.cuda_error == 209);
  REQUIRE(j.failing().size() == 1);
  CHECK(j.failing()[0]->kernel.name == "hand_made_kernel");
  CHECK(j.failing_units() == std::vector<std::string>{"fatbin 0"});
  o.fatbins[0].translation_unit = "old_tu.cu";
  CHECK(judge_object(o, check_object(o, dev), dev).failing_units() == std::vector<std::string>{"old_tu.cu"});
}

TEST_CASE("fleet files: the corpus shared with the CMake reader", "[coverage][fleet]") {
  // tests/data/fleet/EXPECTED.txt: <file>|<sms> or <file>|ERROR|<line>|<fragment>; the CMake
  // reader runs over the same lines (tests/cmake/check_fleet.cmake).
  const std::string dir = ARCHGUARD_SOURCE_DIR "/tests/data/fleet/";
  int cases = 0;
  for (const std::string& line : corpus_lines(dir + "EXPECTED.txt")) {
    std::vector<std::string> f;
    for (std::size_t pos = 0;;) {
      const std::size_t bar = line.find('|', pos);
      f.push_back(line.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos));
      if (bar == std::string::npos) break;
      pos = bar + 1;
    }
    REQUIRE(f.size() >= 2);
    std::ifstream in(dir + f[0], std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    INFO(f[0]);
    auto m = parse_fleet_csv(ss.str(), f[0]);
    ++cases;
    if (f[1] == "ERROR") {
      REQUIRE(f.size() == 4);
      REQUIRE_FALSE(m.ok());
      const std::string where = f[2] == "0" ? f[0] + ": " : f[0] + ":" + f[2] + ": ";
      CHECK(m.message().rfind(where, 0) == 0);
      CHECK(m.message().find(f[3]) != std::string::npos);
      continue;
    }
    REQUIRE(m.ok());
    std::vector<unsigned> got;  // one entry per row (the CMake list keeps duplicates too)
    for (const auto& model : *m)
      for (unsigned i = 0; i < model.count; ++i) got.push_back(model.cc.major * 10 + model.cc.minor);
    std::vector<unsigned> want;
    for (std::size_t pos = 0; pos < f[1].size();) {
      const std::size_t comma = f[1].find(',', pos);
      want.push_back(static_cast<unsigned>(std::stoul(f[1].substr(pos, comma - pos))));
      pos = comma == std::string::npos ? f[1].size() : comma + 1;
    }
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    CHECK(got == want);
  }
  CHECK(cases >= 8);
  SECTION("a NUL byte is reported with its line") {
    auto m = parse_fleet_csv(std::string("NVIDIA A100, 8.0\nbroken\0 GPU, 9.0\n", 33), "nul.csv");
    REQUIRE_FALSE(m.ok());
    CHECK(m.message().rfind("nul.csv:2: the line holds a NUL byte", 0) == 0);
  }
}

TEST_CASE("variant keys: architecture and CUDA runtime tokens in file names", "[coverage][package]") {
  CHECK(variant_key("libbitsandbytes_cuda118.so") == "libbitsandbytes_{cuda}.so");
  CHECK(variant_key("libbitsandbytes_cuda110_nocublaslt.so") == "libbitsandbytes_{cuda}_nocublaslt.so");
  CHECK(variant_cuda("libbitsandbytes_cuda118.so") == 118);
  CHECK(variant_cuda("libbitsandbytes_cuda132.so") == 132);
  CHECK(variant_key("fmhaSm100aKernel_QE4m3.cubin") == "fmha{arch}Kernel_QE4m3.cubin");
  CHECK(variant_key("fmhaSm103aKernel_QE4m3.cubin") == "fmha{arch}Kernel_QE4m3.cubin");
  CHECK(variant_key("_C_cutlass_90a.abi3.so") == "_C_cutlass_{arch}.abi3.so");
  CHECK(variant_key("kernels_sm_80.so") == "kernels_{arch}.so");
  CHECK(variant_key("cupy_backends_cu12x.so") == "cupy_backends_{cuda}.so");
  CHECK(variant_cuda("cupy_backends_cu12x.so") == 120);
  // no token: a plain name, a version number, an unknown architecture, a word that merely starts with "sm"
  CHECK(variant_key("libcublas.so.13") == "");
  CHECK(variant_key("_C_mxfp8.cpython-310-x86_64-linux-gnu.so") == "");
  CHECK(variant_key("small_sm99.so") == "");
  CHECK(variant_key("smooth.so") == "");
}

namespace {

ObjectJudgement judged_tier(Tier t, int error = 209) {
  ObjectJudgement j;
  j.tier = t;
  j.cuda_error = is_problem(t) ? error : 0;
  return j;
}

}  // namespace

TEST_CASE("package verdicts: a failure only when no variant serves the GPU", "[coverage][package]") {
  const Device h100 = device_for_cc({9, 0});
  const ObjectJudgement runs = judged_tier(Tier::all_run), none = judged_tier(Tier::none_run),
                        some = judged_tier(Tier::some_missing);
  SECTION("variants per CUDA runtime: one that runs serves the package") {
    std::vector<PackageMember> m{{"w.whl:pkg/lib_cuda110.so", &none, false, 75, false},
                                 {"w.whl:pkg/lib_cuda118.so", &runs, false, 75, false}};
    const PackageVerdict p = judge_package(m, h100);
    CHECK_FALSE(p.problem);
    CHECK(p.excused == std::vector<bool>{true, false});
    CHECK(p.variance[0] == Variance::variant);
    REQUIRE(p.groups.size() == 1);
    CHECK(p.groups[0].find("lib_{cuda}.so: 2 variants per CUDA runtime; 1 serve this GPU (lib_cuda118.so)") == 0);
  }
  SECTION("no variant runs: the package fails, naming the group") {
    std::vector<PackageMember> m{{"pkg/lib_cuda110.so", &none, false, 75, false}, {"pkg/lib_cuda111.so", &none, false, 75, false}, {"pkg/other.so", &runs, false, 75, false}};
    const PackageVerdict p = judge_package(m, h100);
    CHECK(p.problem);
    CHECK(p.cuda_error == 209);
    CHECK(p.summary == "fails: no variant of lib_{cuda}.so runs here");
  }
  SECTION("variants in different directories are not variants of one another") {
    std::vector<PackageMember> m{{"a/lib_sm80.so", &none, false, 80, false}, {"b/lib_sm90.so", &runs, false, 90, false}};
    CHECK(judge_package(m, h100).problem);
  }
  SECTION("architecture-specific and newer-only objects are built for other GPUs on purpose") {
    std::vector<PackageMember> m{{"pkg/_C_cutlass_90a.so", &runs, true, 90, false}, {"pkg/_C_mxfp8.so", &none, false, 100, false}};
    PackageVerdict p = judge_package(m, h100);
    CHECK_FALSE(p.problem);
    CHECK(p.variance[1] == Variance::newer);
    // on an A100 neither runs: nothing of the package is for it, which is not a broken install
    m[0].judgement = &none;
    p = judge_package(m, device_for_cc({8, 0}));
    CHECK_FALSE(p.problem);
    CHECK(p.summary.find("holds no device code for this GPU") == 0);
  }
  SECTION("alone, an object built for newer GPUs only is not for this GPU: a failure") {
    std::vector<PackageMember> m{{"pkg/ext.so", &none, false, 100, false}};
    CHECK(judge_package(m, h100).problem);
    std::vector<PackageMember> two{{"pkg/a.so", &none, false, 100, false}, {"pkg/b.so", &none, false, 100, false}};
    CHECK(judge_package(two, h100).problem);
  }
  SECTION("an object built for older GPUs only is not excused: it is stale") {
    std::vector<PackageMember> m{{"pkg/core.so", &runs, false, 80, false}, {"pkg/ops.so", &none, false, 70, false}};
    const PackageVerdict p = judge_package(m, h100);
    CHECK(p.problem);
    CHECK(p.summary == "fails: ops.so none-run");
  }
  SECTION("a library a program loads is never a variant") {
    std::vector<PackageMember> m{{"dir/app", &runs, false, 80, false}, {"dir/libx_sm100.so", &some, false, 100, true}, {"dir/libx_sm90.so", &runs, false, 90, true}};
    CHECK(judge_package(m, h100).problem);
  }
}

TEST_CASE("the members of an archive are judged as one static library", "[coverage][package]") {
  std::vector<ObjectFatbins> objs;
  objs.push_back(object("libk.a:a.o", {fatbin({img(CodeKind::ptx, 80)})}));
  objs.push_back(object("libk.a:empty.o", {}));
  objs.push_back(object("libk.a:b.o", {fatbin({img(CodeKind::ptx, 100)})}));
  objs.push_back(object("app", {fatbin({img(CodeKind::ptx, 80)})}));
  for (auto& o : objs) o.elf_type = 1;
  for (std::size_t i = 0; i < 3; ++i) {
    objs[i].archive = "libk.a";
    objs[i].member = objs[i].path.substr(7);
  }
  const auto judged = judged_objects(objs);
  REQUIRE(judged.size() == 2);
  REQUIRE(judged[0].merged);
  CHECK(judged[0].members == 2);
  const ObjectFatbins& lib = judged[0].get();
  CHECK(lib.path == "libk.a");
  CHECK(object_kind(lib) == ObjectKind::static_library);
  REQUIRE(lib.fatbins.size() == 2);
  CHECK(lib.fatbins[1].index == 1);
  CHECK(lib.fatbins[1].translation_unit == "b.o");
  CHECK(judged[1].object == &objs[3]);
  // on 9.0 a.o's code JITs, b.o's (compute_100 only) cannot: the unit is named by its member
  const Device dev = device_for_cc({9, 0});
  const ObjectVerdict v = check_object(lib, dev);
  REQUIRE(v.units.size() == 2);
  CHECK(v.units[0].verdict.outcome == Outcome::jit);
  CHECK(v.units[1].verdict.outcome == Outcome::fail);
  CHECK(v.units[1].translation_unit == "b.o");
  CHECK(judge_object(lib, v, dev).kind == ObjectKind::static_library);
}

TEST_CASE("an archive's merged members have an identity of their own, from the members'", "[coverage][package]") {
  // As the scan names them: "<archive identity>\n<ordinal> <member>" (empty without a store).
  const std::string archive = "file 64768 131 4096 1700000000000000000 1700000000000000000";
  auto member = [&](const std::string& id, const std::string& name, std::size_t fatbins) {
    std::vector<Fatbin> fbs;
    for (std::size_t i = 0; i < fatbins; ++i) fbs.push_back(fatbin({img(CodeKind::ptx, 80)}));
    ObjectFatbins o = object("libk.a:" + name, std::move(fbs));
    o.elf_type = 1;
    o.archive = "libk.a";
    o.member = name;
    o.identity = id.empty() ? std::string() : id + " " + name;
    return o;
  };
  auto identity_of = [](const std::vector<ObjectFatbins>& objs) {
    const auto judged = judged_objects(objs);
    REQUIRE(judged.size() == 1);
    REQUIRE(judged[0].merged);
    return judged[0].get().identity;
  };
  const std::vector<ObjectFatbins> two = {member(archive + "\n0", "a.o", 2), member(archive + "\n1", "empty.o", 0),
                                          member(archive + "\n2", "b.o", 1)};
  const std::string id = identity_of(two);
  CHECK(id == archive + "\nmerged 0:2 2:1");
  // Never a file's nor a member's identity.
  for (const ObjectFatbins& o : two) CHECK(id != o.identity);
  CHECK(id != archive);
  // Another state of the archive (its change time moved): another identity.
  const std::string later = "file 64768 131 4096 1700000000000000000 1700000000000000001";
  CHECK(identity_of({member(later + "\n0", "a.o", 2), member(later + "\n2", "b.o", 1)}) != id);
  // The same members giving their fatbins otherwise (another scan's reading): another identity.
  CHECK(identity_of({member(archive + "\n0", "a.o", 1), member(archive + "\n2", "b.o", 2)}) != id);
  // Another member taken in the place of one: another identity.
  CHECK(identity_of({member(archive + "\n0", "a.o", 2), member(archive + "\n3", "c.o", 1)}) != id);
  // A member without an identity (no store, the archive changed in the last seconds), or members
  // of different archives under one name: none.
  CHECK(identity_of({member(archive + "\n0", "a.o", 2), member("", "b.o", 1)}).empty());
  CHECK(identity_of({member(archive + "\n0", "a.o", 2), member(later + "\n2", "b.o", 1)}).empty());
  // An identity that is not a member's of this name: none.
  ObjectFatbins odd = member(archive + "\n0", "a.o", 1);
  odd.identity = archive + "\nx a.o";
  CHECK(identity_of({odd}).empty());
  // Members nested in a wheel: the archive's identity is itself a member's.
  const std::string nested = archive + "\n7 pkg/lib/libk.a";
  CHECK(identity_of({member(nested + "\n0", "a.o", 1)}) == nested + "\nmerged 0:1");
}

TEST_CASE("the image the driver takes must decode: a corrupt one fails the load with 200", "[coverage][kernels]") {
  static const std::byte garbage[16] = {};
  FatbinEntry sass = img(CodeKind::sass, 90);
  sass.raw_kind = kEntryKindElf;
  sass.compression = Compression::lz4;
  sass.payload = Bytes(garbage, sizeof garbage);
  sass.stored_size = sizeof garbage;
  sass.compressed_size = sizeof garbage;
  sass.uncompressed_size = 4096;
  ObjectFatbins o = object("app", {fatbin({sass})});
  o.elf_type = 2;
  const Device dev = device_for_cc({9, 0});
  const ObjectVerdict v = check_object(o, dev);
  CHECK(v.outcome == Outcome::fail);
  CHECK(v.cuda_error == kErrInvalidImage);
  CHECK(v.units[0].verdict.reason.find("the sm_90 image the driver takes does not decode") == 0);
  // stored, but not an ELF file
  FatbinEntry plain = img(CodeKind::sass, 90);
  plain.raw_kind = kEntryKindElf;
  plain.payload = Bytes(garbage, sizeof garbage);
  plain.stored_size = sizeof garbage;
  ObjectFatbins p = object("app2", {fatbin({plain})});
  CHECK(check_object(p, dev).cuda_error == kErrInvalidImage);
}

TEST_CASE("package verdicts: a package built per GPU explains its other objects without an image", "[coverage][package]") {
  const Device gpu = device_for_cc({12, 0});
  const ObjectJudgement none = judged_tier(Tier::none_run), runs = judged_tier(Tier::all_run);
  // flashinfer-cubin's shape: cubins named for their GPU (Sm100f: no trace in the cubin itself)
  // and a few without a name token; none is for this GPU
  std::vector<PackageMember> m{{"c/fmhaSm100fKernel_A.cubin", &none, false, 100, false},
                               {"c/fmhaSm103aKernel_A.cubin", &none, false, 103, false},
                               {"c/Gemm_B_sm100f.cubin", &none, false, 100, false},
                               {"c/Gemm_C_sm100f.cubin", &none, false, 100, false},
                               {"c/kernel.fp8_gemm.0074.cubin", &none, false, 100, false}};
  PackageVerdict p = judge_package(m, gpu);
  CHECK_FALSE(p.problem);
  CHECK(p.excused == std::vector<bool>(5, true));
  // not so when most objects are ordinary builds: the odd one out is a failure
  std::vector<PackageMember> plain{{"p/a.so", &runs, false, 75, false}, {"p/b.so", &runs, false, 75, false}, {"p/c.so", &runs, false, 75, false}, {"p/d.so", &none, false, 100, false}, {"p/e_sm90a.so", &none, false, 90, false}};
  p = judge_package(plain, gpu);
  CHECK(p.problem);
  CHECK(p.summary == "fails: d.so none-run");
}
