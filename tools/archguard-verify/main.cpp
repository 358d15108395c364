// SPDX-License-Identifier: Apache-2.0
// archguard-verify: the verify verb of archguard without its dependencies (no CLI11, no
// libarchive, no compression library), built by the CMake module in seconds when the full tool
// is not installed. It reads ELF files and ar archives of ELF objects with the project's own
// ELF and fatbin readers and judges them with the project's own coverage rules, so its verdict
// is archguard verify's. Compressed payloads are never decoded: the verdict needs only the
// entry headers (only the device-link test decodes an image, and that image is uncompressed).
//
//   archguard-verify [verify] FILE... --require LIST [--ptx highest|none|ARCH] [--allow-compatible]
//                    [--strict] [--lines] [-q|--quiet]
//   archguard-verify arch normalize [--format cmake|gencode|torch|tf|codes] TEXT...
//   archguard-verify arch plan --policy P --nvcc-release X.Y --nvcc-sass L --nvcc-ptx L ... (archguard arch plan)
// Exit codes as archguard verify: 0 ok, 1 an architecture is missing, 2 bad usage or input.
// "arch normalize" is archguard arch normalize: the CMake module hands it the nvcc flag syntax
// (-gencode, -arch/-code) it does not parse itself and reads the answer back in the codes format
// (sm_80;compute_80;lto_80), so that the token grammar has one owner (src/arch/tokens.cpp).
#include <archguard/arch.hpp>
#include <archguard/coverage.hpp>
#include <archguard/elf.hpp>
#include <archguard/fatbin.hpp>
#include <archguard/policy.hpp>
#include <archguard/verify_output.hpp>

#include "common/fs.hpp"

#include <elf.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace archguard;

constexpr int kExitOk = 0, kExitProblem = 1, kExitUsage = 2;

struct Inputs {
  std::vector<std::unique_ptr<std::string>> storage;  // keeps the bytes alive
  std::vector<ObjectFatbins> objects;
  std::vector<std::string> errors;
};

void add_elf(Inputs& in, Bytes bytes, const std::string& display, const std::string& archive,
             const std::string& member) {
  // As archguard: an archive member that is not a 64-bit little-endian ELF carries nothing.
  if (!archive.empty() && (bytes.size() <= EI_DATA || bytes[EI_CLASS] != std::byte{ELFCLASS64} || bytes[EI_DATA] != std::byte{ELFDATA2LSB})) return;
  auto elf = ElfFile::parse(bytes, display);
  if (!elf) {
    in.errors.push_back(elf.message());
    return;
  }
  auto fatbins = read_elf_fatbins(*elf);
  if (!fatbins) {
    in.errors.push_back(fatbins.message());
    return;
  }
  if (fatbins->empty() && !archive.empty()) return;
  in.objects.push_back(ObjectFatbins::of_elf(*elf, display, archive, member, std::move(*fatbins)));
}

std::string trim_right(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '/')) s.pop_back();
  return s;
}

// The System V / GNU ar format: "!<arch>\n", then 60-byte member headers (name 16, size at 48,
// decimal, 10 bytes), members padded to even offsets; "//" holds long names ("/<offset>").
void add_archive(Inputs& in, Bytes bytes, const std::string& path) {
  const ByteReader r(bytes, path);
  std::uint64_t at = 8;
  std::string_view long_names;
  while (at < bytes.size()) {
    auto header = r.span(at, 60, "ar member header");
    if (!header) {
      in.errors.push_back(header.message());
      return;
    }
    const auto* h = reinterpret_cast<const char*>(header->data());  // text header, bounds checked above
    if (h[58] != '`' || h[59] != '\n') {
      in.errors.push_back(path + ": ar member header at " + hex(at) + " lacks its end marker");
      return;
    }
    std::string raw_name(h, 16), size_text(h + 48, 10);
    std::uint64_t size = 0;
    for (char c : size_text) {
      if (c == ' ') break;
      if (c < '0' || c > '9' || size > (std::uint64_t{1} << 50)) {
        in.errors.push_back(path + ": ar member header at " + hex(at) + ": bad size '" + trim_right(size_text) + "'");
        return;
      }
      size = size * 10 + static_cast<std::uint64_t>(c - '0');
    }
    auto data = r.span(at + 60, size, "ar member");
    if (!data) {
      in.errors.push_back(data.message());
      return;
    }
    std::string name = trim_right(raw_name);
    if (raw_name.rfind("//", 0) == 0) {
      long_names = std::string_view(reinterpret_cast<const char*>(data->data()), data->size());
    } else if (raw_name.rfind("/", 0) == 0 && raw_name.size() > 1 && raw_name[1] >= '0' && raw_name[1] <= '9') {
      const std::size_t off = std::strtoul(raw_name.c_str() + 1, nullptr, 10);
      if (off < long_names.size()) {
        const std::string_view rest = long_names.substr(off);
        name = trim_right(std::string(rest.substr(0, rest.find('\n'))));
      }
      add_elf(in, *data, path + ":" + name, path, name);
    } else if (!name.empty() && looks_like_elf(*data)) {
      add_elf(in, *data, path + ":" + name, path, name);
    }
    at += 60 + size + (size & 1);
  }
}

void read_input(Inputs& in, const std::string& path) {
  auto text = common::read_file(path, true);  // a directory or a device is refused by name
  if (!text) {
    in.errors.push_back(text.message());
    return;
  }
  auto buf = std::make_unique<std::string>(std::move(*text));
  const Bytes bytes(reinterpret_cast<const std::byte*>(buf->data()), buf->size());  // the file's bytes
  in.storage.push_back(std::move(buf));
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), "!<arch>\n", 8) == 0)
    add_archive(in, bytes, path);
  else if (looks_like_elf(bytes))
    add_elf(in, bytes, path, "", "");
  else
    in.errors.push_back(path +
                        ": not an ELF file or an ar archive (archguard-verify reads only those; "
                        "use archguard verify for wheels, tarballs and fatbin files)");
}

int usage(const char* msg) {
  std::fprintf(stderr,
               "archguard-verify: %s\nusage: archguard-verify FILE... --require LIST [--ptx highest|none|ARCH] "
               "[--allow-compatible] [--strict] [--lines] [-q|--quiet]\n       archguard-verify arch normalize [--format F] TEXT...\n",
               msg);
  return kExitUsage;
}

// archguard arch normalize: the words joined by blanks, parsed as one list, printed in the
// --format dialect (default cmake); an error on stderr with exit 2. --format is picked out of the
// words as archguard does, so both tools answer alike (test cli_verifier_agrees).
int normalize(int argc, char** argv, int first) {
  std::string text, format = "cmake";
  for (int i = first; i < argc; ++i) {
    const std::string w = argv[i];
    if (w == "--format" && i + 1 < argc) format = argv[++i];
    else if (w.rfind("--format=", 0) == 0) format = w.substr(9);
    else text += (text.empty() ? "" : " ") + w;
  }
  if (text.empty()) return usage("arch normalize: give at least one target, e.g. 'archguard-verify arch normalize 80 sm_90a'");
  const auto normal = normalize_list(text, format);
  if (!normal) {
    std::fprintf(stderr, "archguard-verify: %s\n", normal.message().c_str());
    return kExitUsage;
  }
  std::printf("%s\n", normal->c_str());
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "arch" && std::string(argv[2]) == "normalize") return normalize(argc, argv, 3);
  if (argc > 2 && std::string(argv[1]) == "arch" && std::string(argv[2]) == "plan") {
    const archguard::PlanCommandOutput out = archguard::run_plan_command(std::vector<std::string>(argv + 3, argv + argc));
    std::fputs(out.text.c_str(), stdout);
    return out.exit_code;
  }
  std::vector<std::string> files;
  std::string require, ptx;
  bool have_require = false, allow_compatible = false, strict = false, quiet = false, lines = false;
  // "archguard-verify verify FILE ..." is accepted too: the CMake verify step calls both tools alike.
  const int first = argc > 1 && std::string(argv[1]) == "verify" ? 2 : 1;
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--require" || a == "--ptx") {
      if (i + 1 >= argc) return usage((a + " needs a value").c_str());
      (a == "--require" ? require : ptx) = argv[++i];
      have_require = have_require || a == "--require";
    } else if (a.rfind("--require=", 0) == 0) {
      require = a.substr(10);
      have_require = true;
    } else if (a.rfind("--ptx=", 0) == 0) {
      ptx = a.substr(6);
    } else if (a == "--allow-compatible") {
      allow_compatible = true;
    } else if (a == "--strict") {
      strict = true;
    } else if (a == "--lines") {
      lines = true;
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "archguard-verify FILE... --require LIST [--ptx highest|none|ARCH] [--allow-compatible] [--strict] [-q]\n"
          "Fails (exit 1) unless every kernel-bearing fatbin carries the required SASS and PTX.\n"
          "archguard-verify arch normalize [--format cmake|gencode|torch|tf|codes] TEXT...\n"
          "Prints targets in any dialect, nvcc flags included, in canonical form (as archguard arch normalize).\n");
      return kExitOk;
    } else if (a.rfind("-", 0) == 0) {
      return usage(("unknown option '" + a + "'").c_str());
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) return usage("no file given");
  if (!have_require) return usage("--require is required");
  auto req = parse_requirement(require, ptx);
  if (!req) {
    std::fprintf(stderr, "archguard-verify: %s\n", req.message().c_str());
    return kExitUsage;
  }
  req->allow_compatible = allow_compatible;
  req->strict = strict;
  Inputs in;
  for (const auto& f : files) read_input(in, f);
  const VerifyReport report = verify(in.objects, *req);
  const bool passed = report.passed();
  const int code = !in.errors.empty() ? kExitUsage : passed ? kExitOk
                                                            : kExitProblem;
  if (lines) {  // the line format of the CMake verify step
    std::fputs(verify_lines(report, in.errors).c_str(), stdout);
    return code;
  }
  for (const auto& e : in.errors) std::fprintf(stderr, "archguard-verify: error: %s\n", escape_control(e).c_str());
  std::fputs(verify_text(report, quiet, code != kExitOk).c_str(), stdout);
  if (report.units.empty() && in.errors.empty()) {
    std::fprintf(stderr, "archguard-verify: note: no device code in the given files; nothing to verify\n");
    return kExitOk;
  }
  return code;
}
