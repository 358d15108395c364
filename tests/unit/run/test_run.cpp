// SPDX-License-Identifier: Apache-2.0
// archguard run's analysis on recorded event streams (no GPU, no CUPTI): reading event files,
// what is kept and what becomes a problem, error names, and explanations that need no file.
// The end-to-end cases with nvcc-built device code are in run_fake.sh.
#include <archguard/run.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace archguard;
using namespace archguard::run;

namespace {
const char* kStream =
    R"({"ev":"process","t":1,"pid":42,"ppid":7,"origin":"injection","exe":"/usr/bin/python3.12","argv":["python3","train.py"],"env":{"_":0,"CUDA_VISIBLE_DEVICES":"1"},"driver_version_line":"NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue Nov 4 2025"}
{"ev":"recorder","t":2,"status":"ok","detail":"27 of 27 callbacks enabled","cupti":"/usr/local/cuda/lib64/libcupti.so.13","predict":0}
{"ev":"device","t":3,"ordinal":0,"cc_major":9,"cc_minor":0,"integrated":0,"name":"NVIDIA H200","driver_cuda":13000}
{"ev":"fail","t":4,"api":"cudaLaunchKernel","domain":"runtime","result":209,"key":77,"func":"0x7f00","device":0}
{"ev":"fail","t":5,"api":"cuLaunchKernel","domain":"driver","result":209,"key":78,"inside":"cudaLaunchKernel","function":"0x1","device":0}
{"ev":"repeat","t":6,"key":77,"count":12}
{"ev":"counts","t":7,"launches":100,"failed_launches":12,"module_loads":0,"modules":3,"launched_overflow":0,"lines_dropped":0,"copied_bytes":0}
)";
}  // namespace

TEST_CASE("an event stream is read back with every field", "[run]") {
  const ProcessRecording p = parse_events(kStream, "p42.events");
  CHECK(p.pid == 42);
  CHECK(p.ppid == 7);
  CHECK(p.argv == std::vector<std::string>{"python3", "train.py"});
  CHECK(p.env.at("CUDA_VISIBLE_DEVICES") == "1");
  CHECK(p.recorder_status == "ok");
  REQUIRE(p.devices.size() == 1);
  CHECK(p.devices[0].cc == Version2{9, 0});
  CHECK(p.devices[0].name == "NVIDIA H200");
  REQUIRE(p.failures.size() == 2);
  CHECK(p.failures[0].runtime);
  CHECK(p.failures[0].count == 12);  // the repeat line is folded in
  CHECK(p.failures[1].inside == "cudaLaunchKernel");
  CHECK(p.complete);
  CHECK(p.launches == 100);
  CHECK(p.problems.empty());
}

TEST_CASE("a cut last line and an unknown event are problems, not silence", "[run]") {
  const std::string text = std::string(kStream) + "{\"ev\":\"mystery\",\"t\":8}\n{\"ev\":\"fail\",\"api\":\"cudaLaun";
  const ProcessRecording p = parse_events(text, "p42.events");
  REQUIRE(p.problems.size() == 2);
  CHECK(p.problems[0].find("p42.events: line 8: unknown event 'mystery'") == 0);
  CHECK(p.problems[1].find("p42.events: line 9: not a complete event") == 0);
  CHECK(p.failures.size() == 2);  // what came before is kept
}

TEST_CASE("a process killed before its closing line is marked incomplete", "[run]") {
  const std::string text(kStream, std::string_view(kStream).find("{\"ev\":\"counts\""));
  CHECK_FALSE(parse_events(text, "x").complete);
}

TEST_CASE("names that are not UTF-8 arrive as Latin-1 escapes and survive", "[run]") {
  const ProcessRecording p = parse_events(
      "{\"ev\":\"fail\",\"api\":\"cuModuleGetFunction\",\"domain\":\"driver\",\"result\":500,\"kernel\":\"k\\u00ff\\u0001\"}\n", "x");
  REQUIRE(p.failures.size() == 1);
  CHECK(p.failures[0].kernel == "k\xc3\xbf\x01");
}

TEST_CASE("error names follow the runtime and the driver", "[run]") {
  CHECK(error_name(209, true) == "cudaErrorNoKernelImageForDevice");
  CHECK(error_name(209, false) == "CUDA_ERROR_NO_BINARY_FOR_GPU");
  CHECK(error_name(500, true) == "cudaErrorSymbolNotFound");
  CHECK(error_name(500, false) == "CUDA_ERROR_NOT_FOUND");
  CHECK(error_name(223, false) == "CUDA_ERROR_JIT_COMPILATION_DISABLED");
  CHECK(error_name(12345, true).empty());
  CHECK(may_be_architecture(209, true));
  CHECK(may_be_architecture(98, true));
  CHECK_FALSE(may_be_architecture(98, false));
  CHECK_FALSE(may_be_architecture(2, true));
  CHECK_FALSE(may_be_architecture(700, true));
}

TEST_CASE("the driver failure inside a runtime failure is reported once, by the runtime call", "[run]") {
  Recording rec;
  rec.processes.push_back(parse_events(kStream, "p42.events"));
  const Report r = analyze(rec);
  CHECK(r.recorded);
  REQUIRE(r.processes.size() == 1);
  REQUIRE(r.processes[0].failures.size() == 1);
  const Explained& x = r.processes[0].failures[0];
  CHECK(x.api == "cudaLaunchKernel");
  CHECK(x.count == 12);
  CHECK(x.cc == Version2{9, 0});
  // The host function lies in no file: said, never guessed.
  CHECK(x.cause.find("lies in no file of the process") != std::string::npos);
  CHECK(x.architecture);
}

TEST_CASE("a recorder that could not start is reported with its reason", "[run]") {
  Recording rec;
  rec.processes.push_back(parse_events(
      "{\"ev\":\"process\",\"pid\":5}\n{\"ev\":\"recorder\",\"status\":\"unavailable\",\"detail\":\"CUPTI is already used by another tool ('Nsight Systems')\"}\n",
      "p5.events"));
  const Report r = analyze(rec);
  CHECK_FALSE(r.recorded);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0] == "process 5: CUPTI is already used by another tool ('Nsight Systems')");
}

TEST_CASE("no event file at all says that no process initialised CUDA", "[run]") {
  const auto dir = std::filesystem::temp_directory_path() / "archguard-test-run-empty";
  std::filesystem::create_directories(dir);
  auto rec = read_recording(dir.string());
  REQUIRE(rec);
  const Report r = analyze(*rec);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].find("no process initialised CUDA") == 0);
  std::filesystem::remove_all(dir);
  CHECK_FALSE(read_recording((dir / "missing").string()));
}

TEST_CASE("a load of an image that is neither copied nor in a file is explained without a file", "[run]") {
  Recording rec;
  rec.processes.push_back(parse_events(
      std::string(R"EV({"ev":"process","pid":9}
{"ev":"recorder","status":"ok"}
{"ev":"device","ordinal":0,"cc_major":8,"cc_minor":6,"integrated":0,"name":"X","driver_cuda":13000}
{"ev":"load","api":"cuModuleLoadData","result":209,"ms":0.5,"handle":"0x0","modules":0,"image_kind":"elf","image_size":4096,"image":"0x5000","copy":"skipped: over the copy budget (ARCHGUARD_RUN_MAX_COPY)","device":0}
)EV"),
      "p9.events"));
  const Report r = analyze(rec);
  REQUIRE(r.processes[0].failures.size() == 1);
  const Explained& x = r.processes[0].failures[0];
  CHECK(x.origin.kind == "memory");
  CHECK(x.file.empty());
  CHECK(x.cause.find("over the copy budget") != std::string::npos);
  CHECK(x.architecture);
  REQUIRE_FALSE(x.fixes.empty());
  CHECK(x.fixes[0].details[0].find("--gpu-architecture=sm_86") != std::string::npos);
}
