// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the fatbin reader, with the CLI's own limits (ScanOptions' defaults: inflate
// budgets, member size, nesting depth; decompress's default image limit) and the CLI's way in:
// the bytes are written to a file and read with scan_path (mapping, peek, libarchive reading
// the file), then as bytes in memory as a raw fatbin region, as a section embedding fatbins and as a standalone cubin/PTX/LTO-IR file; every image is decompressed
// and its kernels listed. Built with libFuzzer by run_libfuzzer.sh (clang); replayed over the
// corpora by replay_main.cpp.
#include <archguard/container.hpp>
#include <archguard/fatbin.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void decode_all(const archguard::ObjectFatbins& object) {
  for (const auto& fb : object.fatbins) {
    (void)fb.images();
    (void)fb.identifier();
    for (const auto& e : fb.entries) {
      if (e.kind == archguard::CodeKind::ltoir) continue;
      auto image = archguard::decompress(e, object.path);  // the CLI's limit
      if (!image) continue;
      (void)archguard::list_kernels(e, *image, object.path);
    }
  }
}

/// One file per process, rewritten for every input.
const std::string& input_file() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr && *dir != 0 ? dir : "/tmp") + "/archguard-fuzz-" + std::to_string(::getpid());
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  archguard::ScanOptions options;  // the CLI's defaults
  options.threads = 1;
  {
    const std::string& path = input_file();
    if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
      const bool written = std::fwrite(data, 1, size, f) == size;
      std::fclose(f);
      if (written) {
        auto report = archguard::scan_path(path, options);
        if (report)
          for (const auto& o : report->objects) decode_all(o);
      }
      std::remove(path.c_str());
    }
  }
  const archguard::Bytes bytes(reinterpret_cast<const std::byte*>(data), size);  // the fuzzer's buffer
  auto report = archguard::scan_bytes(bytes, "fuzz-input", options);
  if (report)
    for (const auto& o : report->objects) decode_all(o);
  // The bytes as a loaded data section that may embed fatbins, and as a standalone file.
  for (std::uint64_t address : {0, 4}) {
    archguard::ObjectFatbins embedded;
    embedded.path = "fuzz-section";
    embedded.fatbins = archguard::find_embedded_fatbins(bytes, "fuzz-section", ".rodata", 0, address);
    decode_all(embedded);
  }
  if (auto standalone = archguard::read_standalone(bytes, "fuzz-file")) {
    archguard::ObjectFatbins o;
    o.path = "fuzz-file";
    o.fatbins.push_back(std::move(*standalone));
    decode_all(o);
  }
  auto region = archguard::Fatbin::parse_all(bytes, "fuzz-region");
  if (region) {
    archguard::ObjectFatbins o;
    o.path = "fuzz-region";
    o.fatbins = std::move(*region);
    decode_all(o);
  }
  return 0;
}
