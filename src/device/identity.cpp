// SPDX-License-Identifier: Apache-2.0
// machine_identity: what decides the GPUs the driver reports, read without starting it.
#include <archguard/device.hpp>

#include "common/fd.hpp"
#include "common/fs.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace archguard::device {
namespace {

/// Appends one field: its tag and its value, each with its length (no value can fake another).
void add(std::string& out, std::string_view tag, std::string_view value) {
  out += tag;
  out += '=';
  out += std::to_string(value.size());
  out += ':';
  out += value;
  out += '\n';
}

std::vector<std::string> names_in(const std::string& dir) {
  common::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return {};
  std::vector<std::string> names = common::list_dir(fd.get());
  std::sort(names.begin(), names.end());
  return names;
}

/// A small text file's content with trailing white space removed; none when it cannot be read.
std::optional<std::string> small_text(const std::string& path) {
  auto text = common::read_file(path);
  if (!text || text->size() > (std::size_t{1} << 16)) return std::nullopt;
  std::string s = std::move(*text);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string stat_text(const struct stat& st) {
  return std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ctim.tv_sec) +
         "." + std::to_string(st.st_ctim.tv_nsec);
}

/// The tree of /proc/driver/nvidia/capabilities (MIG instances appear and vanish there), by
/// names only, bounded in depth and size.
void add_tree(std::string& out, const std::string& dir, const std::string& rel, int depth, std::size_t& budget) {
  if (depth > 6) return;
  for (const std::string& n : names_in(dir)) {
    if (budget == 0) return;
    --budget;
    add(out, "cap", rel + "/" + n);
    struct stat st {};
    if (::lstat((dir + "/" + n).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) add_tree(out, dir + "/" + n, rel + "/" + n, depth + 1, budget);
  }
}

/// The file the dynamic loader picks for `lib`, by loading it without calling into it (the
/// driver's start is cuInit, not its loading); the library stays loaded, as Driver keeps it.
std::optional<std::string> loaded_file(const std::string& lib) {
  void* h = ::dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return std::nullopt;
  struct link_map* map = nullptr;
  if (::dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr || *map->l_name == '\0')
    return std::nullopt;
  return std::string(map->l_name);
}

}  // namespace

std::optional<std::string> machine_identity(const std::string& root_in) {
  std::string root = root_in;
  if (root.empty())
    if (const char* r = std::getenv("ARCHGUARD_SYS_ROOT"); r != nullptr) root = r;
  std::string out;
  // The kernel module: absent, the driver cannot start and only it can say why.
  auto module = small_text(root + "/proc/driver/nvidia/version");
  if (!module) return std::nullopt;
  add(out, "module", *module);
  // NVIDIA's PCI functions (a container sees them all; /dev says which it may use).
  std::size_t functions = 0;
  const std::string pci = root + "/sys/bus/pci/devices";
  for (const std::string& fn : names_in(pci)) {
    const std::string d = pci + "/" + fn;
    auto vendor = small_text(d + "/vendor");
    if (!vendor || *vendor != "0x10de") continue;
    ++functions;
    add(out, "pci", fn);
    for (const char* attr : {"class", "device", "subsystem_vendor", "subsystem_device", "revision"}) {
      auto v = small_text(d + "/" + attr);
      add(out, attr, v ? *v : std::string("?"));
    }
  }
  if (functions == 0) return std::nullopt;
  // The device nodes this process could open: their number, owner, mode and access.
  std::size_t nodes = 0;
  const std::string dev = root + "/dev";
  for (const std::string& n : names_in(dev)) {
    if (!n.starts_with("nvidia")) continue;
    struct stat st {};
    const std::string path = dev + "/" + n;
    if (::stat(path.c_str(), &st) != 0) continue;
    ++nodes;
    add(out, "dev", n + " " + std::to_string(st.st_mode) + " " + std::to_string(st.st_rdev) + " " + std::to_string(st.st_uid) + " " + std::to_string(st.st_gid) + " " + (::access(path.c_str(), R_OK | W_OK) == 0 ? "rw" : "no"));
  }
  if (nodes == 0) return std::nullopt;
  std::size_t budget = 4096;
  add_tree(out, root + "/proc/driver/nvidia/capabilities", "", 0, budget);
  if (budget == 0) return std::nullopt;  // an unexpected tree: not summed up here
  // The user-space driver the loader would pick, and which file it is.
  auto file = loaded_file(default_driver_library());
  if (!file) return std::nullopt;
  struct stat st {};
  if (::stat(file->c_str(), &st) != 0) return std::nullopt;
  add(out, "libcuda", *file + " " + stat_text(st));
  add(out, "ids", std::to_string(::getuid()) + " " + std::to_string(::getgid()));
  return out;
}

}  // namespace archguard::device
