// SPDX-License-Identifier: Apache-2.0
#include <archguard/arch.hpp>

#include <catch2/catch.hpp>

using namespace archguard;

TEST_CASE("table rows are ascending and consistent", "[arch][table]") {
  REQUIRE(arch_rows().size() >= 20);
  unsigned prev = 0;
  for (const ArchRow& row : arch_rows()) {
    INFO("sm " << row.sm);
    CHECK(row.sm > prev);
    prev = row.sm;
    CHECK(cc_of_sm(row.sm) == row.cc);
    CHECK_FALSE(row.first_cuda.empty());
    if (!row.removed_in.empty()) CHECK(row.removed_in > row.first_cuda);
    // 'a' exists only for CC >= 9.0, 'f' only for CC >= 10.0 with a family (rules 3, 4).
    if (!row.a_since.empty()) CHECK(row.cc >= Version2{9, 0});
    if (!row.f_since.empty()) {
      CHECK(row.cc >= Version2{10, 0});
      CHECK(row.family != 0);
      CHECK(row.f_since >= Version2{12, 9});
    }
    if (row.family != 0) CHECK(find_arch(row.family) != nullptr);
  }
  prev = 0;
  for (const ReleaseRow& rel : release_rows()) {
    CHECK(rel.cuda.packed() > prev);
    prev = rel.cuda.packed();
    if (*rel.min_driver != '\0') CHECK(parse_driver_version(rel.min_driver).ok());
  }
}

TEST_CASE("table agrees with compatibility.md", "[arch][table]") {
  // The Tegra parts of rule 1.
  for (unsigned sm : {53u, 62u, 72u, 87u}) CHECK(find_arch(sm)->tegra);
  for (unsigned sm : {50u, 60u, 70u, 80u, 86u, 89u, 90u, 100u, 120u}) CHECK_FALSE(find_arch(sm)->tegra);
  // Rule 3: the 'a' architectures.
  std::vector<unsigned> with_a;
  for (const ArchRow& row : arch_rows()) {
    if (!row.a_since.empty() && row.removed_in.empty()) with_a.push_back(row.sm);
  }
  CHECK(with_a == std::vector<unsigned>{90, 100, 103, 107, 110, 120, 121});
  // Rule 4: families in ptxas 13.0.
  CHECK(family_of(100) == family_of(103));
  CHECK(family_of(120) == family_of(121));
  CHECK(family_of(110) != family_of(100));
  CHECK(family_of(90) == 0);
  // Releases.
  CHECK(find_release({13, 0})->ptx_isa == Version2{9, 0});
  CHECK(std::string(find_release({13, 0})->min_driver) == "580.65.06");
  CHECK(find_release({12, 8})->ptx_isa == Version2{8, 7});
  CHECK(find_release({12, 7}) == nullptr);
  // The RTX 4060 Ti is CC 8.9, not 8.6.
  CHECK(std::string(find_arch(89)->products).find("RTX 4060 Ti") != std::string::npos);
  CHECK(std::string(find_arch(86)->products).find("4060") == std::string::npos);
  // The rename.
  REQUIRE(find_rename(101) != nullptr);
  CHECK(find_rename(101)->new_sm == 110);
  CHECK(find_rename(101)->cuda == Version2{13, 0});
  CHECK(find_rename(110) == nullptr);
}

TEST_CASE("supported_by_release follows first, removed and suffix columns", "[arch][table]") {
  CHECK(supported_by_release({90, Suffix::a}, {12, 0}));
  CHECK_FALSE(supported_by_release({90, Suffix::a}, {11, 8}));
  CHECK(supported_by_release({90, Suffix::none}, {11, 8}));
  CHECK_FALSE(supported_by_release({100, Suffix::f}, {12, 8}));  // 'f' arrived in 12.9
  CHECK(supported_by_release({100, Suffix::f}, {12, 9}));
  CHECK(supported_by_release({101, Suffix::none}, {12, 9}));
  CHECK_FALSE(supported_by_release({101, Suffix::none}, {13, 0}));  // renamed sm_110
  CHECK(supported_by_release({110, Suffix::none}, {13, 0}));
  CHECK_FALSE(supported_by_release({70, Suffix::none}, {13, 0}));  // removed in 13.0
  CHECK(supported_by_release({70, Suffix::none}, {12, 9}));
  CHECK(supported_by_release({75, Suffix::none}, {13, 0}));
  CHECK_FALSE(supported_by_release({86, Suffix::a}, {13, 0}));
  CHECK_FALSE(supported_by_release({91, Suffix::none}, {13, 0}));
}

TEST_CASE("driver versions parse, format and map to a PTX ISA", "[arch][table]") {
  Result<DriverVersion> v = parse_driver_version("580.65.06");
  REQUIRE(v.ok());
  CHECK(*v == DriverVersion{580, 65, 6});
  CHECK(format_driver_version(*v) == "580.65.06");
  CHECK(*parse_driver_version("455.23") == DriverVersion{455, 23, 0});
  CHECK(format_driver_version({455, 23, 0}) == "455.23");
  CHECK(*parse_driver_version(" 580\n") == DriverVersion{580, 0, 0});
  CHECK(format_driver_version({580, 0, 0}) == "580");
  for (const char* bad : {"", "abc", "580.", ".65", "580..6", "580.65.06.1", "580-65", "1234567"}) {
    INFO(bad);
    Result<DriverVersion> r = parse_driver_version(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().find("driver version") == 0);
  }
  // Driver 580 (CUDA 13.0) accepts PTX ISA 9.0 and rejects 9.1 (measured on the H200).
  CHECK(ptx_isa_for_driver({580, 159, 4}) == Version2{9, 0});
  CHECK(ptx_isa_for_driver({580, 65, 6}) == Version2{9, 0});
  CHECK(ptx_isa_for_driver({575, 51, 3}) == Version2{8, 8});
  CHECK(ptx_isa_for_driver({575, 51, 2}) == Version2{8, 7});
  CHECK(ptx_isa_for_driver({450, 51, 5}) == Version2{7, 0});
  CHECK(ptx_isa_for_driver({440, 0, 0}).empty());
  CHECK(min_driver_for_ptx_isa({9, 0}) == "580.65.06");
  CHECK(min_driver_for_ptx_isa({8, 6}) == "570.26");  // no release has 8.6: the next one up
  // CUDA 13.1 and 13.2 (release notes, "CUDA Toolkit and Corresponding Driver Versions").
  CHECK(min_driver_for_ptx_isa({9, 1}) == "590.44.01");
  CHECK(min_driver_for_ptx_isa({9, 2}) == "595.45.04");
  CHECK(ptx_isa_for_driver({590, 44, 1}) == Version2{9, 1});
  CHECK(ptx_isa_for_driver({590, 44, 0}) == Version2{9, 0});
  CHECK(ptx_isa_for_driver({595, 45, 4}) == Version2{9, 2});
  CHECK(min_driver_for_ptx_isa({9, 3}).empty());  // 13.3's driver is not recorded
}

TEST_CASE("a driver version given with fewer numbers compares on those numbers", "[arch][table]") {
  const DriverVersion need = *parse_driver_version("580.65.06");
  CHECK(parse_driver_version("580.65")->components == 2);
  CHECK(parse_driver_version("580")->components == 1);
  CHECK(driver_at_least(*parse_driver_version("580.65"), need));  // 580.65 is not older than 580.65.06
  CHECK(driver_at_least(*parse_driver_version("580"), need));
  CHECK(driver_at_least(*parse_driver_version("580.65.06"), need));
  CHECK_FALSE(driver_at_least(*parse_driver_version("580.65.05"), need));
  CHECK_FALSE(driver_at_least(*parse_driver_version("580.64"), need));
  CHECK_FALSE(driver_at_least(*parse_driver_version("575"), need));
  CHECK(driver_at_least(*parse_driver_version("581"), need));
  // The PTX ISA limit follows: --driver 580.65 accepts what 580.65.06 accepts.
  CHECK(ptx_isa_for_driver(*parse_driver_version("580.65")) == Version2{9, 0});
  CHECK(ptx_isa_for_driver(*parse_driver_version("575.51")) == Version2{8, 8});
  CHECK(min_driver_for_ptx_isa({9, 9}).empty());
}

TEST_CASE("arches_of_major lists plain and suffixed targets", "[arch][table]") {
  std::vector<std::string> eight, nine, ten;
  for (Arch a : arches_of_major(8)) eight.push_back(arch_number(a));
  for (Arch a : arches_of_major(9)) nine.push_back(arch_number(a));
  for (Arch a : arches_of_major(10)) ten.push_back(arch_number(a));
  CHECK(eight == std::vector<std::string>{"80", "86", "87", "88", "89"});
  CHECK(nine == std::vector<std::string>{"90", "90a"});
  CHECK(ten == std::vector<std::string>{"100", "100a", "100f", "101", "101a", "101f", "103", "103a", "103f", "107",
                                        "107a", "107f"});
}

TEST_CASE("check_release_support explains why a release rejects a target", "[arch][table]") {
  CHECK(check_release_support({{100, Suffix::f}, CodeKind::sass}, {12, 9}).ok());
  Status f = check_release_support({{100, Suffix::f}, CodeKind::sass}, {12, 8});
  REQUIRE_FALSE(f.ok());
  CHECK(f.message() == "sm_100f: the 'f' variant needs CUDA 12.9 or later, this is CUDA 12.8");
  Status rn = check_release_support({{101}, CodeKind::sass}, {13, 0});
  REQUIRE_FALSE(rn.ok());
  CHECK(rn.message() == "sm_101: renamed sm_110 in CUDA 13.0; CUDA 13.0 accepts only the new name: use 110");
  Status rna = check_release_support({{101, Suffix::a}, CodeKind::ptx}, {13, 1});
  REQUIRE_FALSE(rna.ok());
  CHECK(rna.message().find("renamed compute_110a") != std::string::npos);
  CHECK(check_release_support({{101}, CodeKind::sass}, {12, 9}).ok());
  Status gone = check_release_support({{70}, CodeKind::sass}, {13, 0});
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.message().find("removed in CUDA 13.0") != std::string::npos);
  Status early = check_release_support({{89}, CodeKind::sass}, {11, 7});
  REQUIRE_FALSE(early.ok());
  CHECK(early.message().find("first CUDA is 11.8") != std::string::npos);
  CHECK_FALSE(check_release_support({{86, Suffix::a}, CodeKind::sass}, {13, 0}).ok());
  CHECK_FALSE(check_release_support({{91}, CodeKind::sass}, {13, 0}).ok());
  // Agrees with supported_by_release everywhere.
  for (const ArchRow& row : arch_rows()) {
    for (const ReleaseRow& rel : release_rows()) {
      for (Suffix s : {Suffix::none, Suffix::a, Suffix::f}) {
        CHECK(check_release_support({{row.sm, s}, CodeKind::sass}, rel.cuda).ok() ==
              supported_by_release({row.sm, s}, rel.cuda));
      }
    }
  }
}
