// SPDX-License-Identifier: Apache-2.0
// Replays fuzz corpora through LLVMFuzzerTestOneInput without libFuzzer (any compiler), so the
// corpus runs as an ordinary test. Arguments: files or directories (read recursively).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
/// 1 while a prefix of an input is replayed: a target may skip its costly amplified variants
/// then (fuzz_fatbin does; they ran 64 times per seed). Weak: defined here and in the targets.
extern "C" {
__attribute__((weak)) int archguard_fuzz_prefix_run = 0;
}

int main(int argc, char** argv) {
  std::size_t inputs = 0;
  auto run = [&inputs](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());  // char as bytes
    // Every prefix of small inputs too: truncation is the commonest corruption.
    if (bytes.size() <= 4096)
      for (std::size_t cut = 0; cut < bytes.size(); cut += 1 + bytes.size() / 64) {
        archguard_fuzz_prefix_run = 1;
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), cut);  // char as bytes
        archguard_fuzz_prefix_run = 0;
      }
    ++inputs;
  };
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file()) run(e.path());
    } else {
      run(p);
    }
  }
  std::cout << "replayed " << inputs << " inputs\n";
  return inputs == 0 ? 1 : 0;
}
