// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the fatbin reader: the bytes as a user's input (ELF, fatbin, ar/zip/tar)
// as a raw memory region, as a section embedding fatbins and as a standalone cubin/PTX/LTO-IR file, then every image decompressed (bounded) and its kernels listed.
// Built with libFuzzer by run_libfuzzer.sh (clang); replayed over the corpora by replay_main.cpp.
#include <archguard/container.hpp>
#include <archguard/fatbin.hpp>

#include <cstddef>
#include <cstdint>

namespace {

void decode_all(const archguard::ObjectFatbins& object) {
  for (const auto& fb : object.fatbins) {
    (void)fb.images();
    (void)fb.identifier();
    for (const auto& e : fb.entries) {
      if (e.kind == archguard::CodeKind::ltoir) continue;
      auto image = archguard::decompress(e, object.path, std::uint64_t{1} << 20);
      if (!image) continue;
      (void)archguard::list_kernels(e, *image, object.path);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const archguard::Bytes bytes(reinterpret_cast<const std::byte*>(data), size);  // the fuzzer's buffer
  archguard::ScanOptions options;
  options.threads = 1;
  options.max_member_size = std::uint64_t{16} << 20;
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
