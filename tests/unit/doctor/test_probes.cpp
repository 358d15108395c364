// SPDX-License-Identifier: Apache-2.0
// Doctor's second opinions run their tools through the library's one process runner: no shell
// (a path with quotes and spaces is a path), stderr kept out of the parsed output.
#include "doctor/probes.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace archguard;
using namespace archguard::doctor::detail;
namespace fs = std::filesystem;

namespace {

struct FakeTool {
  fs::path dir;
  fs::path path;
  explicit FakeTool(const std::string& name, const std::string& script) {
    std::string tmpl = (fs::temp_directory_path() / "archguard-probes-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    // A directory name a shell would split and unquote: only a runner without a shell finds it.
    dir = fs::path(tmpl) / "it's a $dir; `x`";
    fs::create_directories(dir);
    path = dir / name;
    std::ofstream(path) << "#!/bin/sh\n"
                        << script;
    ::chmod(path.c_str(), 0755);
  }
  ~FakeTool() {
    std::error_code ec;
    fs::remove_all(dir.parent_path(), ec);
  }
};

}  // namespace

TEST_CASE("probe_nvidia_smi runs the tool without a shell and ignores its stderr", "[doctor][probes]") {
  FakeTool smi("nvidia-smi",
               "[ \"$1\" = --query-gpu=index,name,pci.bus_id,compute_cap,driver_version ] || exit 2\n"
               "[ \"$2\" = --format=csv,noheader ] || exit 2\n"
               "echo 'a warning on stderr' >&2\n"
               "echo '0, NVIDIA H200, 00000000:1B:00.0, 9.0, 580.65.06'\n");
  const ProbeResult r = probe_nvidia_smi(smi.path.string());
  INFO(r.problem);
  REQUIRE(r.available);
  CHECK(r.problem.empty());
  REQUIRE(r.gpus.size() == 1);
  CHECK(r.gpus[0].name == "NVIDIA H200");
  CHECK(r.gpus[0].cc == Version2{9, 0});
  REQUIRE(r.driver.has_value());
  CHECK(*r.driver == DriverVersion{580, 65, 6});
}

TEST_CASE("probe_nvidia_smi says why a failing tool gave nothing", "[doctor][probes]") {
  FakeTool smi("nvidia-smi", "echo 'NVIDIA-SMI has failed'; exit 9\n");
  const ProbeResult r = probe_nvidia_smi(smi.path.string());
  CHECK_FALSE(r.available);
  CHECK(r.problem == smi.path.string() + " did not run or failed (exit status 9)");
  const ProbeResult none = probe_nvidia_smi("/nonexistent/nvidia-smi");
  CHECK_FALSE(none.available);
  CHECK(none.problem.find("cannot run '/nonexistent/nvidia-smi'") != std::string::npos);
}

TEST_CASE("probe_nvcc reads the release of a fake nvcc in an awkward path", "[doctor][probes]") {
  FakeTool nvcc("nvcc",
                "[ \"$1\" = --version ] || exit 2\n"
                "echo 'Cuda compilation tools, release 13.0, V13.0.88'\n");
  const ToolVersion t = probe_nvcc(nvcc.path.string());
  INFO(t.problem);
  REQUIRE(t.version.has_value());
  CHECK(*t.version == Version2{13, 0});
  CHECK(t.where == nvcc.path.string());
}
