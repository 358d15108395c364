// SPDX-License-Identifier: Apache-2.0
#include <archguard/toolkit.hpp>

#include <catch2/catch.hpp>

#include "skip.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace archguard;

namespace {

// Abridged from nvcc 13.0's --help: the section before, the --gpu-architecture section with
// its allowed values, and the next option.
constexpr std::string_view kHelp = R"(--no-device-link                                    (-nodlink)
        Skip the device link step when linking object files.

--gpu-architecture <arch>                           (-arch)
        Specify the name of the class of NVIDIA 'virtual' GPU architecture for which
        the CUDA input files must be compiled.
        Allowed values for this option:  'all','all-major','compute_100','compute_100a',
        'compute_100f','compute_75','compute_90','compute_90a','lto_100f','lto_90a',
        'native','sm_100','sm_100a','sm_100f','sm_75','sm_90','sm_90a'.

--gpu-code <code>,...                               (-code)
        Allowed values for this option:  'compute_120','sm_120'.
)";

std::filesystem::path temp_dir() {
  std::string templ = (std::filesystem::temp_directory_path() / "archguard-toolkit-XXXXXX").string();
  REQUIRE(::mkdtemp(templ.data()) != nullptr);
  return templ;
}

std::string fake_nvcc(const std::filesystem::path& dir, const std::string& body) {
  const std::filesystem::path p = dir / "nvcc";
  std::ofstream(p) << "#!/bin/sh\n"
                   << body << "\n";
  ::chmod(p.c_str(), 0755);
  return p.string();
}

std::vector<std::string> names(const std::vector<Arch>& v, CodeKind k) {
  std::vector<std::string> out;
  for (Arch a : v) out.push_back(nvcc_name(a, k));
  return out;
}

}  // namespace

TEST_CASE("parse nvcc --version", "[toolkit]") {
  std::string build;
  Result<Version2> v = parse_nvcc_version(
      "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n", &build);
  REQUIRE(v.ok());
  CHECK(*v == Version2{13, 0});
  CHECK(build == "13.0.88");
  CHECK(*parse_nvcc_version("Cuda compilation tools, release 12.10, V12.10.1") == Version2{12, 10});
  Result<Version2> bad = parse_nvcc_version("bash: nvcc: command not found");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().find("no 'release X.Y'") != std::string::npos);
  CHECK_FALSE(parse_nvcc_version("release x.y").ok());
}

TEST_CASE("parse nvcc --list-gpu-code / --list-gpu-arch", "[toolkit]") {
  Result<std::vector<Arch>> s = parse_nvcc_list("sm_75\nsm_80\nsm_100\nsm_110\nsm_103\nsm_130\n", CodeKind::sass);
  REQUIRE(s.ok());
  // Sorted, and sm_130 (not in the table) kept.
  CHECK(names(*s, CodeKind::sass) == std::vector<std::string>{"sm_75", "sm_80", "sm_100", "sm_103", "sm_110", "sm_130"});
  Result<std::vector<Arch>> bad = parse_nvcc_list("sm_75\ncompute_80\n", CodeKind::sass);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().find("line 2") != std::string::npos);
  CHECK_FALSE(parse_nvcc_list("", CodeKind::ptx).ok());
}

TEST_CASE("parse the a/f values of nvcc --help", "[toolkit]") {
  Result<std::vector<Target>> v = parse_nvcc_help_arch_values(kHelp);
  REQUIRE(v.ok());
  std::vector<std::string> got;
  for (const Target& t : *v) got.push_back(nvcc_name(t.arch, t.kind));
  // Only the --gpu-architecture section counts (not --gpu-code's sm_120); shorthands skipped.
  CHECK(got == std::vector<std::string>{"sm_75", "compute_75", "sm_90", "compute_90", "sm_90a", "compute_90a",
                                        "lto_90a", "sm_100", "compute_100", "sm_100a", "compute_100a", "sm_100f",
                                        "compute_100f", "lto_100f"});
  CHECK_FALSE(parse_nvcc_help_arch_values("usage: nvcc [options] <inputs>").ok());
}

TEST_CASE("find_nvcc reports where it looked", "[toolkit]") {
  Result<std::string> r = find_nvcc("/nonexistent/bin/nvcc");
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "nvcc '/nonexistent/bin/nvcc' does not exist or is not an executable file");
  CHECK_FALSE(query_nvcc("/nonexistent/bin/nvcc").ok());
}

TEST_CASE("a broken or hung nvcc gives an error, not a crash", "[toolkit]") {
  const std::filesystem::path dir = temp_dir();
  Result<NvccInfo> garbage = query_nvcc(fake_nvcc(dir, "echo hello"));
  REQUIRE_FALSE(garbage.ok());
  CHECK(garbage.message().find("no 'release X.Y'") != std::string::npos);
  Result<NvccInfo> failing = query_nvcc(fake_nvcc(dir, "echo 'nvcc fatal : boom' >&2; exit 3"));
  REQUIRE_FALSE(failing.ok());
  CHECK(failing.message().find("exit status 3") != std::string::npos);
  CHECK(failing.message().find("boom") != std::string::npos);
  Result<NvccInfo> hung = query_nvcc(fake_nvcc(dir, "exec sleep 5"), std::chrono::milliseconds(200));
  REQUIRE_FALSE(hung.ok());
  CHECK(hung.message().find("did not finish within 200 ms") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the installed nvcc agrees with the architecture table", "[toolkit][nvcc]") {
  Result<std::string> path = find_nvcc();
  if (!path) ARCHGUARD_SKIP(path.message());
  Result<NvccInfo> info = query_nvcc();
  INFO((info ? std::string() : info.message()));
  REQUIRE(info.ok());
  INFO("nvcc " << info->path << " release " << info->release.major << "." << info->release.minor);
  CHECK_FALSE(info->build.empty());
  const ReleaseRow* rel = find_release(info->release);
  if (rel == nullptr) {
    // The agreement this case is about cannot be checked: say so (tests/toolkits/freshness.sh
    // names the rows to add) rather than pass on the basic checks alone.
    CHECK_FALSE(info->sass.empty());
    ARCHGUARD_SKIP("nvcc release " << info->release.major << "." << info->release.minor
                                   << " is not in the architecture table: only the basic checks ran");
  }
  // Every target the table says this release accepts, nvcc lists, and nothing else that the
  // table knows (a newer nvcc than the table may list architectures the table lacks).
  for (const ArchRow& row : arch_rows()) {
    for (Suffix s : {Suffix::none, Suffix::a, Suffix::f}) {
      const Arch arch{row.sm, s};
      const bool table = supported_by_release(arch, info->release);
      for (CodeKind k : {CodeKind::sass, CodeKind::ptx}) {
        INFO(nvcc_name(arch, k));
        CHECK(info->supports({arch, k}) == table);
      }
      if (!info->ltoir.empty()) CHECK(info->supports({arch, CodeKind::ltoir}) == table);
    }
  }
  if (info->release == Version2{13, 0}) {
    CHECK(info->supports({{90, Suffix::a}, CodeKind::sass}));
    CHECK(info->supports({{100, Suffix::f}, CodeKind::ptx}));
    CHECK(info->supports({{110}, CodeKind::sass}));
    CHECK_FALSE(info->supports({{101}, CodeKind::sass}));  // renamed sm_110
    CHECK_FALSE(info->supports({{86, Suffix::a}, CodeKind::sass}));
    CHECK_FALSE(info->supports({{70}, CodeKind::sass}));  // removed in 13.0
  }
}
