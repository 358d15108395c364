// SPDX-License-Identifier: Apache-2.0
#include <archguard/doctor.hpp>

#include <catch2/catch.hpp>

using namespace archguard;
using namespace archguard::doctor;

TEST_CASE("statuses order fail > warn > pass > skip", "[doctor]") {
  CHECK(worst(Level::pass, Level::fail) == Level::fail);
  CHECK(worst(Level::warn, Level::pass) == Level::warn);
  CHECK(worst(Level::skip, Level::pass) == Level::pass);
  Step s;
  CHECK(s.status() == Level::skip);
  s.findings.push_back({Level::pass, "a", "b", ""});
  s.findings.push_back({Level::warn, "a", "b", "c"});
  CHECK(s.status() == Level::warn);
}

TEST_CASE("nvidia-smi's compute_cap column parses", "[doctor]") {
  CHECK(parse_cc("9.0") == Version2{9, 0});
  CHECK(parse_cc(" 12.1\n") == Version2{12, 1});
  CHECK_FALSE(parse_cc("[N/A]").has_value());
  CHECK_FALSE(parse_cc("9").has_value());
  CHECK_FALSE(parse_cc("9.10").has_value());
  CHECK_FALSE(parse_cc("").has_value());
}

TEST_CASE("/proc/driver/nvidia/version parses", "[doctor]") {
  auto v = parse_proc_driver_version(
      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U16)  Thu\n"
      "GCC version:  gcc version 12.2.0\n");
  REQUIRE(v.has_value());
  CHECK(*v == DriverVersion{580, 159, 4});
  auto w = parse_proc_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n");
  REQUIRE(w.has_value());
  CHECK(*w == DriverVersion{550, 54, 14});
  CHECK_FALSE(parse_proc_driver_version("garbage").has_value());
}

TEST_CASE("the rebuild fix is spelled in CMake, nvcc and PyTorch form", "[doctor]") {
  const Fix f = rebuild_fix({9, 0}, "libfoo.so");
  CHECK(f.kind == FixKind::rebuild);
  CHECK(f.text.find("9.0") != std::string::npos);
  REQUIRE(f.details.size() == 3);
  CHECK(f.details[0].find("CMAKE_CUDA_ARCHITECTURES") != std::string::npos);
  CHECK(f.details[0].find("90") != std::string::npos);
  CHECK(f.details[1].find("sm_90") != std::string::npos);
  CHECK(f.details[1].find("compute_90") != std::string::npos);
  CHECK(f.details[2].find("TORCH_CUDA_ARCH_LIST") != std::string::npos);
  CHECK(f.details[2].find("9.0") != std::string::npos);
  const auto t = targets_for({8, 6});
  REQUIRE(t.size() == 2);
  CHECK(t[0] == Target{Arch{86, Suffix::none}, CodeKind::sass});
  CHECK(t[1] == Target{Arch{86, Suffix::none}, CodeKind::ptx});
}
