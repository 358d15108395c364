// SPDX-License-Identifier: Apache-2.0
#pragma once
/// Fleets: which nodes of a cluster hold which GPUs under which driver, gathered from the nodes'
/// own reports (`archguard doctor --json`, concatenated as `srun` or `kubectl logs` print them),
/// from what Slurm knows (`scontrol show node`, `sinfo` GRES) or from the labels NVIDIA GPU
/// Feature Discovery puts on Kubernetes nodes. The result is a fleet report (schema
/// `archguard.fleet/1`, docs/json-schema.md), node groups for `check --fleet`, and the fleet CSV
/// that `ARCH_POLICY=fleet:` reads (parse_fleet_csv).
///
/// Nothing is dropped silently: a malformed document, a duplicate node, a GPU name the
/// architecture table does not know each become a Problem naming where it was found.
/// Never prints, never throws.

#include <archguard/arch.hpp>
#include <archguard/result.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace archguard::fleet {

/// One GPU model of a node (a node with four H100 has one entry with count 4 when its source
/// counts them, or four entries with their UUIDs when it lists them).
struct NodeGpu {
  std::string name;  ///< "NVIDIA H100 80GB HBM3", the GRES type "a100", the label "NVIDIA-A100-SXM4-80GB"
  Version2 cc;
  bool tegra = false;
  std::string uuid;  ///< "GPU-5a1c..." when known
  std::string mig;   ///< "enabled", "disabled" or "" (unknown)
  std::size_t count = 1;
};

/// A CUDA runtime or compiler found on the node.
struct Runtime {
  std::string name;  ///< "nvcc", "nvrtc", "cudart"
  Version2 version;
  std::string where;  ///< its path
};

/// One verdict a node report carries about a file it was given (doctor step 3).
struct FileVerdict {
  std::string subject;
  std::string status;  ///< pass, warn, fail, skip
  std::string message;
};

struct Node {
  std::string name;    ///< Slurm NodeName, Kubernetes node name or host name
  std::string source;  ///< "report", "slurm", "kubernetes"
  std::string where;   ///< "reports.json: document 3 (byte 1200)"
  std::vector<NodeGpu> gpus;
  std::optional<DriverVersion> driver;  ///< 580.65.06
  std::optional<Version2> driver_cuda;  ///< the CUDA version the driver supports (13.0)
  std::vector<Runtime> runtimes;
  std::string verdict;  ///< the doctor's verdict (report only): pass, warn, fail
  std::string problem;  ///< the node's own trouble ("no cuda driver: ...")
  std::string time;     ///< when the report was made (UTC, ISO 8601), "" unknown
  std::vector<FileVerdict> files;
  std::size_t gpu_count() const;
};

/// Something in the input that is not a node, or a node that could not be taken as it is.
struct Problem {
  std::string where;  ///< "reports.json: document 4 (byte 1834)", "scontrol: node gpu-c07"
  std::string message;
};

struct Fleet {
  std::vector<Node> nodes;
  std::vector<Problem> problems;
  std::vector<std::string> notes;  ///< what was skipped on purpose ("3 nodes without GPUs")
  std::size_t documents = 0;       ///< node reports or records read
};

/// Extra GPU names (a site's GRES types such as "gpu:big:4"), name -> capability; looked up
/// before the architecture table, matched without regard to case.
using NameMap = std::map<std::string, Version2, std::less<>>;

/// The highest PTX ISA a node's driver JIT-compiles: from its version when known, else from the
/// CUDA version it supports; empty when neither is known.
Version2 driver_ptx_isa(const Node& node);
/// The driver to judge a node with: its version, else the minimum driver of the CUDA release it
/// supports; nullopt when neither is known (PTX is then not limited).
std::optional<DriverVersion> effective_driver(const Node& node);

/// Reads a stream of JSON documents (node reports `archguard.doctor/1`, or fleet reports
/// `archguard.fleet/1`, whose nodes are taken as they are) into `into`. `name` names the input
/// in problems. Text between documents is named as a problem, not fatal.
void read_reports(std::string_view text, std::string_view name, Fleet& into);

/// Reads `scontrol show node` (one or several lines per node) or `sinfo -N -h -o "%N %G"` output.
/// GPU types are mapped to capabilities through `names`, then the architecture table.
void read_slurm(std::string_view text, std::string_view name, Fleet& into, const NameMap& names = {});

/// Reads `kubectl get nodes -o json` (a List of Node objects, or one Node) and the labels of
/// NVIDIA GPU Feature Discovery on them.
void read_kubernetes(std::string_view text, std::string_view name, Fleet& into, const NameMap& names = {});

/// Settles a fleet once every input is read: one node per name (a duplicate is named; the
/// newest report is kept, the first when their times are equal or unknown), nodes sorted by
/// name (numbers in names compared as numbers), a GPU UUID reported by two nodes named.
void finish(Fleet& fleet);

/// A node group: nodes that hold the same GPU model under the same driver, judged as one.
struct Group {
  std::string gpu;
  Version2 cc;
  bool tegra = false;
  std::optional<DriverVersion> driver;
  std::optional<Version2> driver_cuda;
  std::size_t gpus = 0;
  std::vector<std::string> nodes;
};

/// The fleet's node groups, in node order. A node holding two models is in two groups.
std::vector<Group> groups(const Fleet& fleet);
/// The nodes without any GPU (no driver, no device visible, a GRES without a type).
std::vector<std::string> nodes_without_gpus(const Fleet& fleet);

/// Node names in Slurm's compressed form: "gpu-a[01-03,07],gpu-b1".
std::string node_list(std::vector<std::string> names);
/// node_list as a summary line shows it: whole up to about two lines of a terminal (160
/// characters); longer, cut after a node with "..." (and the bracket closed) and the count,
/// "gpu[00000,00004,...] (2500 in all: --json lists every one)". Nodes that alternate between
/// groups compress badly: 2,500 of them made a 15 KB line.
std::string brief_node_list(const std::vector<std::string>& names);

/// The fleet report, schema `archguard.fleet/1` (docs/json-schema.md), as compact JSON text.
std::string to_json(const Fleet& fleet);
/// The fleet CSV: "name, compute_cap" then one line per GPU (what parse_fleet_csv reads).
std::string to_csv(const Fleet& fleet);

/// Whether `text` (a file's first bytes) is JSON rather than a fleet CSV.
bool looks_like_json(std::string_view text);

}  // namespace archguard::fleet
