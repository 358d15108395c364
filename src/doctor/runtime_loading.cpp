// SPDX-License-Identifier: Apache-2.0
// Step 3 helper: whether an executable or library loads code at run time (dlopen, the driver's
// module and library loaders, NVRTC, a Python interpreter), read from its dynamic symbol table
// and DT_NEEDED. Static analysis judges only the device code in the files; what such a program
// loads later is for `archguard run` to watch.
#include <archguard/doctor.hpp>

#include "doctor/elf_input.hpp"

#include <algorithm>
#include <filesystem>

namespace archguard::doctor {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

/// "a", "a and b", "a, b and c".
std::string and_list(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

/// `text` as one shell word: quoted when it holds anything but the characters paths usually do.
std::string shell_word(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("/._-+=:,@%").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(text);
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string run_command(std::string_view file) { return "archguard run -- " + shell_word(file) + " [its arguments]"; }

namespace {

/// What the executable or shared library `elf` (of out.path) loads at run time.
Result<RuntimeLoading> loading_of(const ElfFile& elf, RuntimeLoading out) {
  const std::string& path = out.path;
  if (elf.type() != kElfTypeExec && elf.type() != kElfTypeDyn) return out;
  AG_TRY(auto needed, elf.needed());
  AG_TRY(auto symbols, elf.dynamic_symbols());
  out.elf = true;

  // Python: by name (python3.11, python3.11d, python), by libpython (a shared build such as
  // pyenv's or conda's), or by the interpreter's entry points (a static build such as Debian's).
  const std::string name = std::filesystem::path(path).filename().string();
  std::string libpython;
  for (const auto& n : needed)
    if (starts_with(n, "libpython")) libpython = n;
  std::string exported;
  for (const ElfSymbol& sym : symbols)
    if (sym.defined() && (sym.name == "Py_BytesMain" || sym.name == "Py_Initialize")) {
      exported = std::string(sym.name);
      break;
    }
  if (starts_with(name, "python")) out.python = "named " + name;
  else if (!libpython.empty()) out.python = "needs " + libpython;
  else if (!exported.empty()) out.python = "exports " + exported;

  // The static CUDA runtime (nvcc's default) dlopen()s libcuda.so.1 itself: every program built
  // with it imports dlopen and dlmopen, so they alone say nothing. Its marks: nvcc's fatbin
  // sections without libcudart.so in DT_NEEDED, or its own symbols when the file is not stripped.
  const bool dynamic_cudart =
      std::any_of(needed.begin(), needed.end(), [](const std::string& n) { return starts_with(n, "libcudart.so"); });
  if (starts_with(name, "libcudart.so")) {
    out.cuda_runtime = true;  // the runtime library itself: its dlopen opens the driver
  } else if (!dynamic_cudart) {
    out.cuda_runtime = elf.find(".nvFatBinSegment") != nullptr || elf.find(".nv_fatbin") != nullptr ||
                       elf.find("__nv_module_id") != nullptr;
    if (!out.cuda_runtime) {
      auto own = elf.symbols();  // .symtab: absent when stripped, and then only the sections tell
      if (own)
        out.cuda_runtime = std::any_of(own->begin(), own->end(), [](const ElfSymbol& s) {
          return s.defined() && (starts_with(s.name, "_ZN6cudart") || starts_with(s.name, "__cudart"));
        });
    }
  }

  for (std::string_view loader : kRuntimeLoaders) {
    const bool imported = std::any_of(symbols.begin(), symbols.end(),
                                      [&](const ElfSymbol& s) { return !s.defined() && s.name == loader; });
    if (imported) out.imports.emplace_back(loader);
  }
  for (const auto& n : needed)
    if (starts_with(n, "libnvrtc.so")) out.nvrtc.push_back(n);

  if (!out.python.empty())
    out.reasons.push_back("is a python interpreter (" + out.python + ")");
  std::vector<std::string> telling;
  for (const auto& i : out.imports)
    if (!out.cuda_runtime || (i != "dlopen" && i != "dlmopen")) telling.push_back(i);
  if (!telling.empty()) out.reasons.push_back("imports " + and_list(telling));
  if (!out.nvrtc.empty()) out.reasons.push_back("needs " + and_list(out.nvrtc));
  return out;
}

}  // namespace

Result<RuntimeLoading> runtime_loading(const std::string& path) {
  return detail::read_if_elf<RuntimeLoading>(path, loading_of);
}

}  // namespace archguard::doctor
