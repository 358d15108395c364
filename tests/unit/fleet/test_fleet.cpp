// SPDX-License-Identifier: Apache-2.0
// The fleet layer: node reports, Slurm and Kubernetes inputs, merging, groups, the fleet CSV.
#include <archguard/coverage.hpp>
#include <archguard/fleet.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace archguard;
using namespace archguard::fleet;

namespace {

std::string data(const std::string& rel) {
  std::ifstream f(std::string(ARCHGUARD_SOURCE_DIR) + "/tests/data/fleet/" + rel, std::ios::binary);
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A node report as `archguard doctor --json` prints it (the fields the fleet reads).
std::string report(const std::string& node, const std::string& gpu, const std::string& cc, int gpus, const std::string& driver,
                   const std::string& cuda, const std::string& time = "2026-12-02T04:00:00Z", const std::string& uuid_prefix = "GPU-0000") {
  std::string devs;
  for (int i = 0; i < gpus; ++i)
    devs += std::string(i ? "," : "") + R"({"ordinal":)" + std::to_string(i) + R"(,"name":")" + gpu + R"(","cc":")" + cc +
            R"(","tegra":false,"pci_bus_id":"0000:0)" + std::to_string(i + 1) + R"(:00.0","uuid":")" + uuid_prefix + node + "-" +
            std::to_string(i) + R"(","mig_mode":null})";
  return R"({"schema":"archguard.doctor/1","node":{"name":")" + node + R"(","time":")" + time +
         R"(","archguard":"0.1.0","runtimes":[{"name":"nvcc","version":"13.0","where":"/usr/local/cuda/bin/nvcc"}]},)" +
         R"("driver_found":true,"driver_version":)" + (driver.empty() ? "null" : "\"" + driver + "\"") + R"(,"driver_cuda":")" + cuda +
         R"(","devices":[)" + devs + R"(],"steps":[],"verdict":"pass"})" + "\n";
}

using Reader = void (*)(std::string_view text, std::string_view name, Fleet& into, const NameMap& names);

// What `read` (read_slurm, read_kubernetes) makes of `text` read as the file `where`, finished.
Fleet finished(Reader read, const std::string& text, const std::string& where, const NameMap& names = {}) {
  Fleet f;
  read(text, where, f, names);
  finish(f);
  return f;
}

// The fleet of node reports `text` (read as the file `where`), finished.
Fleet merged(const std::string& text, const std::string& where = "-") {
  return finished([](std::string_view t, std::string_view n, Fleet& into, const NameMap&) { read_reports(t, n, into); }, text,
                  where);
}

const Node* find(const Fleet& f, const std::string& name) {
  auto it = std::find_if(f.nodes.begin(), f.nodes.end(), [&](const Node& n) { return n.name == name; });
  return it == f.nodes.end() ? nullptr : &*it;
}

bool has_problem(const Fleet& f, const std::string& fragment) {
  return std::any_of(f.problems.begin(), f.problems.end(), [&](const Problem& p) { return p.message.find(fragment) != std::string::npos; });
}

}  // namespace

TEST_CASE("node reports concatenated as srun prints them are merged", "[fleet]") {
  const std::string text = report("gpu-a01", "NVIDIA H100 80GB HBM3", "9.0", 4, "580.65.06", "13.0") +
                           report("gpu-b01", "NVIDIA A100-SXM4-80GB", "8.0", 2, "550.54.14", "12.4") +
                           "srun: error: gpu-x: task 2: Exited with exit code 3\n" +
                           report("gpu-c01", "NVIDIA GeForce RTX 5090", "12.0", 1, "", "12.8");
  Fleet f = merged(text);
  REQUIRE(f.nodes.size() == 3);
  CHECK(f.documents == 3);
  const Node* a = find(f, "gpu-a01");
  REQUIRE(a != nullptr);
  CHECK(a->gpu_count() == 4);
  CHECK(a->gpus[0].uuid == "GPU-0000gpu-a01-0");
  REQUIRE(a->driver);
  CHECK(format_driver_version(*a->driver) == "580.65.06");
  CHECK(driver_ptx_isa(*a) == Version2{9, 0});
  REQUIRE(a->runtimes.size() == 1);
  CHECK(a->runtimes[0].name == "nvcc");
  // The driver of c01 is known only by the CUDA it supports: judged with that release's minimum.
  const Node* c = find(f, "gpu-c01");
  REQUIRE(c != nullptr);
  CHECK(!c->driver);
  CHECK(driver_ptx_isa(*c) == Version2{8, 7});
  REQUIRE(effective_driver(*c));
  CHECK(format_driver_version(*effective_driver(*c)) == "570.26");
  // The srun line between the documents is named, with its line.
  REQUIRE(f.problems.size() == 1);
  CHECK(f.problems[0].where.find("-:") == 0);
  CHECK(f.problems[0].message.find("not a JSON document: 'srun: error") != std::string::npos);
}

TEST_CASE("duplicate, malformed and foreign documents are named, never dropped silently", "[fleet]") {
  const std::string text = report("n1", "NVIDIA H100 80GB HBM3", "9.0", 1, "580.65.06", "13.0", "2026-12-02T04:00:00Z", "GPU-A") +
                           report("n1", "NVIDIA H200", "9.0", 1, "580.95.05", "13.0", "2026-12-02T05:00:00Z", "GPU-B") +
                           R"({"schema":"archguard.check/2","devices":[]})" + "\n" + R"({"schema":"archguard.doctor/1","devices":[]})" + "\n" +
                           R"({"schema":"archguard.doctor/1","node":{"name":"bad"},"devices":[{"name":"x"}]})" + "\n" +
                           R"({"schema": "archguard.doctor/1", "node": {"name": "n2"}, "devices": [)" + "\n";
  Fleet f = merged(text, "reports.json");
  REQUIRE(f.nodes.size() == 1);
  // The newest report of n1 is kept.
  CHECK(f.nodes[0].gpus[0].name == "NVIDIA H200");
  CHECK(has_problem(f, "node n1 is reported again"));
  CHECK(has_problem(f, "(the newest)"));
  CHECK(has_problem(f, "not a node report: schema 'archguard.check/2'"));
  CHECK(has_problem(f, "names no node"));
  CHECK(has_problem(f, "has no compute capability"));
  CHECK(has_problem(f, "does not end"));
  for (const auto& p : f.problems) CHECK(p.where.find("reports.json") == 0);
}

TEST_CASE("unlabelled interleaved output is named with the remedy, never merged", "[fleet]") {
  // srun without --label: node a's output cut inside a string, node b's whole, then a's rest.
  const std::string a = report("a", "NVIDIA H100 80GB HBM3", "9.0", 1, "580.65.06", "13.0", "2026-12-02T04:00:00Z", "GPU-A");
  const std::string b = report("b", "NVIDIA A100-SXM4-80GB", "8.0", 1, "580.65.06", "13.0", "2026-12-02T04:00:00Z", "GPU-B");
  const std::size_t cut = a.find("H100");
  REQUIRE(cut != std::string::npos);
  Fleet f = merged(a.substr(0, cut) + "\n" + b + a.substr(cut), "plain.txt");
  CHECK(f.nodes.size() <= 1);
  REQUIRE_FALSE(f.problems.empty());
  bool remedy = false;
  for (const auto& p : f.problems) remedy = remedy || p.message.find("run srun with --label") != std::string::npos;
  CHECK(remedy);
}

TEST_CASE("deeply nested or binary input is refused with its offset", "[fleet]") {
  Fleet f;
  read_reports(std::string(200, '[').insert(0, "{\"a\":") + "\n", "deep.json", f);
  REQUIRE(f.problems.size() == 1);
  CHECK(f.problems[0].message.find("nested deeper than 64 levels at byte") != std::string::npos);
  Fleet g;
  read_reports(std::string("\x01\x02\x1b[31mred\n", 10), "bin", g);
  REQUIRE(g.problems.size() == 1);
  CHECK(g.problems[0].message.find("\\x1b") != std::string::npos);  // control characters are shown, not sent
  CHECK(g.nodes.empty());
}

TEST_CASE("a GPU UUID reported by two nodes is named", "[fleet]") {
  std::string text = report("pod-a", "NVIDIA H100 80GB HBM3", "9.0", 1, "580.65.06", "13.0", "t", "GPU-same") +
                     report("pod-b", "NVIDIA H100 80GB HBM3", "9.0", 1, "580.65.06", "13.0", "t", "GPU-same");
  // The UUIDs carry the node name in this helper: make them equal.
  std::size_t at;
  while ((at = text.find("GPU-samepod-b")) != std::string::npos) text.replace(at, 13, "GPU-samepod-a");
  Fleet f = merged(text);
  CHECK(f.nodes.size() == 2);
  CHECK(has_problem(f, "is reported by nodes pod-a and pod-b"));
}

TEST_CASE("node groups: one per model and driver, nodes in natural order", "[fleet]") {
  const std::string text = report("gpu10", "NVIDIA H100 80GB HBM3", "9.0", 8, "580.65.06", "13.0") +
                           report("gpu2", "NVIDIA H100 80GB HBM3", "9.0", 8, "580.65.06", "13.0") +
                           report("gpu3", "NVIDIA H100 80GB HBM3", "9.0", 8, "570.86.15", "12.8") +
                           report("gpu1", "NVIDIA H100 80GB HBM3", "9.0", 8, "580.65.06", "13.0");
  Fleet f = merged(text);
  REQUIRE(f.nodes.size() == 4);
  CHECK(f.nodes[0].name == "gpu1");
  CHECK(f.nodes[1].name == "gpu2");
  CHECK(f.nodes[3].name == "gpu10");
  const auto gs = groups(f);
  REQUIRE(gs.size() == 2);
  CHECK(gs[0].gpus == 24);
  CHECK(gs[0].nodes == std::vector<std::string>{"gpu1", "gpu2", "gpu10"});
  CHECK(gs[1].nodes == std::vector<std::string>{"gpu3"});
  CHECK(node_list(gs[0].nodes) == "gpu[1-2],gpu10");
}

TEST_CASE("node lists in Slurm's compressed form", "[fleet]") {
  CHECK(node_list({"gpu-a03", "gpu-a01", "gpu-a02", "gpu-a07", "gpu-b1"}) == "gpu-a[01-03,07],gpu-b1");
  CHECK(node_list({"login"}) == "login");
  CHECK(node_list({"n1", "n1", "n2"}) == "n[1-2]");
  CHECK(node_list({}).empty());
}

TEST_CASE("a summary's node list is cut after about two lines, never mid-name", "[fleet]") {
  // Every fourth node of 10,000: nothing to compress into ranges.
  std::vector<std::string> every_fourth;
  for (int i = 0; i < 10000; i += 4) {
    char name[16];
    std::snprintf(name, sizeof name, "gpu%05d", i);
    every_fourth.emplace_back(name);
  }
  const std::string whole = node_list(every_fourth);
  REQUIRE(whole.size() > 10000);
  const std::string brief = brief_node_list(every_fourth);
  CHECK(brief.size() < 220);
  CHECK(brief.starts_with("gpu[00000,00004,"));
  CHECK(brief.ends_with(",...] (2500 in all: --json lists every one)"));
  const std::string shown = brief.substr(0, brief.find(",...]"));
  CHECK(whole.starts_with(shown + ","));  // cut after a whole name
  // Outside brackets: no bracket is closed that was not opened.
  std::vector<std::string> plain;
  for (int i = 0; i < 60; ++i) plain.push_back("login-" + std::string(1, static_cast<char>('a' + i % 26)) + std::to_string(i) + "x");
  const std::string brief_plain = brief_node_list(plain);
  CHECK(brief_plain.find(",...") != std::string::npos);
  CHECK(brief_plain.find(",...]") == std::string::npos);
  CHECK(brief_plain.ends_with("(60 in all: --json lists every one)"));
  // Short lists are whole; duplicates are counted once.
  CHECK(brief_node_list({"gpu-a03", "gpu-a01", "gpu-a02"}) == "gpu-a[01-03]");
  std::vector<std::string> twice = every_fourth;
  twice.insert(twice.end(), every_fourth.begin(), every_fourth.end());
  CHECK(brief_node_list(twice) == brief);
}

TEST_CASE("the fleet CSV is what parse_fleet_csv reads, one line per GPU", "[fleet]") {
  const std::string text = report("gpu-a01", "NVIDIA H100 80GB HBM3", "9.0", 2, "580.65.06", "13.0") +
                           report("gpu-b01", "NVIDIA A100-SXM4-80GB", "8.0", 1, "550.54.14", "12.4");
  Fleet f = merged(text);
  const std::string csv = to_csv(f);
  auto models = parse_fleet_csv(csv, "fleet.csv");
  REQUIRE(models);
  REQUIRE(models->size() == 2);
  CHECK((*models)[0].name == "NVIDIA H100 80GB HBM3");
  CHECK((*models)[0].count == 2);
  CHECK((*models)[1].cc == Version2{8, 0});
}

TEST_CASE("a fleet report reads back as the same fleet", "[fleet]") {
  const std::string text = report("gpu-a01", "NVIDIA H100 80GB HBM3", "9.0", 2, "580.65.06", "13.0") +
                           report("gpu-b01", "NVIDIA A100-SXM4-80GB", "8.0", 1, "", "12.4");
  Fleet f = merged(text);
  const std::string once = to_json(f);
  Fleet g = merged(once, "fleet.json");
  CHECK(to_json(g) == once);
}

TEST_CASE("Slurm: scontrol show node, GRES types mapped through the table", "[fleet]") {
  Fleet f = finished(read_slurm, data("slurm/scontrol.txt"), "scontrol.txt");
  CHECK(f.documents == 5);
  const Node* a = find(f, "gpu-a01");
  REQUIRE(a != nullptr);
  REQUIRE(a->gpus.size() == 1);
  CHECK(a->gpus[0].name == "h100");
  CHECK(a->gpus[0].cc == Version2{9, 0});
  CHECK(a->gpus[0].count == 4);
  const Node* b = find(f, "gpu-b01");
  REQUIRE(b != nullptr);
  REQUIRE(b->gpus.size() == 2);
  CHECK(b->gpus[0].cc == Version2{8, 0});  // nvidia_a100-sxm4-80gb (AutoDetect=nvml's spelling)
  CHECK(b->gpus[1].cc == Version2{7, 5});  // tesla_t4
  CHECK(b->gpus[1].count == 2);
  // An untyped GRES and an unknown type are named; their nodes stay, without those GPUs.
  CHECK(has_problem(f, "gres 'gpu:4' names no GPU type"));
  CHECK(has_problem(f, "gres type 'mi250' is not a GPU name the architecture table knows"));
  REQUIRE(find(f, "gpu-c01") != nullptr);
  CHECK(find(f, "gpu-c01")->gpus.empty());
  CHECK(find(f, "cpu01") != nullptr);
  CHECK(nodes_without_gpus(f) == std::vector<std::string>{"cpu01", "gpu-c01", "gpu-d01"});
}

TEST_CASE("Slurm: a site's GPU names, and the one-line form", "[fleet]") {
  Fleet f = finished(read_slurm, "NodeName=x1 Arch=x86_64 Gres=gpu:mi250:2 State=IDLE\nNodeName=x2 Gres=gpu:H100:1 State=IDLE\n", "-", NameMap{{"MI250", Version2{9, 0}}});
  CHECK(f.problems.empty());
  REQUIRE(f.nodes.size() == 2);
  CHECK(f.nodes[0].gpus[0].cc == Version2{9, 0});
  CHECK(f.nodes[1].gpus[0].cc == Version2{9, 0});
}

TEST_CASE("Slurm: sinfo lists a node once per partition", "[fleet]") {
  Fleet f = finished(read_slurm, data("slurm/sinfo.txt"), "sinfo.txt");
  CHECK(f.problems.empty());
  REQUIRE(f.nodes.size() == 6);
  CHECK(f.nodes[0].name == "gpu-a01");
  CHECK(find(f, "gpu-e11")->gpus[0].cc == Version2{8, 9});  // l40s, not l40 or l4
  CHECK(find(f, "gpu-e9")->gpus[0].cc == Version2{12, 0});
  CHECK(nodes_without_gpus(f) == std::vector<std::string>{"login01"});
  Fleet g;
  read_slurm("gpu-a01 gpu:h100:4\ngpu-a01 gpu:a100:4\nbad line here\n", "s", g);
  CHECK(has_problem(g, "appears again with gres 'gpu:a100:4'"));
  CHECK(has_problem(g, "is not '<node> <gres>'"));
}

TEST_CASE("Kubernetes: GPU Feature Discovery labels", "[fleet]") {
  Fleet f = finished(read_kubernetes, data("kubernetes/nodes.json"), "nodes.json");
  CHECK(f.documents == 5);
  const Node* h = find(f, "dgx-h100-01");
  REQUIRE(h != nullptr);
  CHECK(h->gpus[0].name == "NVIDIA-H100-80GB-HBM3");
  CHECK(h->gpus[0].cc == Version2{9, 0});
  CHECK(h->gpus[0].count == 8);
  CHECK(h->gpus[0].mig.empty());
  REQUIRE(h->driver);
  CHECK(format_driver_version(*h->driver) == "570.86.15");
  CHECK(h->driver_cuda == Version2{12, 8});
  const Node* a = find(f, "a100-mig-03");
  REQUIRE(a != nullptr);
  CHECK(a->gpus[0].name == "A100-SXM4-40GB");  // the MIG suffix of the 'single' strategy is not the model
  CHECK(a->gpus[0].mig == "enabled");
  CHECK(a->gpus[0].count == 56);
  REQUIRE(a->driver);
  CHECK(format_driver_version(*a->driver) == "550.127.05");
  // Without compute labels the product name is looked up; time-slicing's -SHARED is dropped.
  const Node* t = find(f, "t4-shared-07");
  REQUIRE(t != nullptr);
  CHECK(t->gpus[0].name == "Tesla-T4");
  CHECK(t->gpus[0].cc == Version2{7, 5});
  CHECK(!t->driver);
  CHECK(find(f, "mystery-09") == nullptr);
  CHECK(has_problem(f, "nvidia.com/gpu.product 'NVIDIA-Xyzzy-9000' is not a GPU name"));
  REQUIRE(f.notes.size() == 1);
  CHECK(f.notes[0].find("1 node(s) without NVIDIA GPU labels") != std::string::npos);
}

TEST_CASE("Kubernetes: what is not a node list is refused", "[fleet]") {
  Fleet f;
  read_kubernetes(R"({"kind":"PodList","items":[]})", "pods.json", f);
  CHECK(has_problem(f, "not a Node or a list of nodes"));
  Fleet g;
  read_kubernetes("not json", "x", g);
  CHECK(has_problem(g, "not a JSON document"));
}

TEST_CASE("GPU names to capabilities through the table's products", "[fleet][arch]") {
  const std::pair<const char*, Version2> known[] = {
      {"a100", {8, 0}},
      {"NVIDIA A100-SXM4-80GB", {8, 0}},
      {"a10", {8, 6}},
      {"h100_80gb", {9, 0}},
      {"NVIDIA GH200 480GB", {9, 0}},
      {"rtx5090", {12, 0}},
      {"NVIDIA GeForce RTX 5090", {12, 0}},
      {"NVIDIA RTX 6000 Ada Generation", {8, 9}},
      {"Quadro RTX 6000", {7, 5}},
      {"NVIDIA RTX PRO 6000 Blackwell Server Edition", {12, 0}},
      {"Tesla V100-SXM2-16GB", {7, 0}},
      {"l4", {8, 9}},
      {"B200", {10, 0}},
  };
  for (const auto& [name, cc] : known) {
    INFO(name);
    CHECK(cc_for_gpu_name(name) == cc);
  }
  for (const char* name : {"mi250", "gpu", ""}) {
    INFO(name);
    CHECK(!cc_for_gpu_name(name));
  }
}
