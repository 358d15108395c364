// SPDX-License-Identifier: Apache-2.0
// One of the processes of the concurrency test: compiles 8 tiny kernels through the cache in
// `argv[1]` and prints, per kernel, whether this process built it and a digest of the image.
#include <archguard/jit.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  using namespace archguard;
  using namespace archguard::jit;
  if (argc != 2) {
    std::fprintf(stderr, "usage: cache_worker CACHE_DIR\n");
    return 2;
  }
  CompilerOptions o;
  CacheOptions c;
  c.dir = argv[1];
  o.cache = c;
  auto compiler = Compiler::create(o);
  if (!compiler) {
    std::fprintf(stderr, "cache_worker: %s\n", compiler.message().c_str());
    return 1;
  }
  for (int i = 0; i < 8; ++i) {
    CompileRequest r;
    r.name = "k" + std::to_string(i) + ".cu";
    r.source = "extern \"C\" __global__ void k" + std::to_string(i) + "(int* p) { p[threadIdx.x] += " +
               std::to_string(i * 3 + 1) + "; }\n";
    r.target = Target{{i % 2 == 0 ? 90u : 80u, Suffix::none}, CodeKind::sass};
    auto out = (*compiler)->compile(r);
    if (!out) {
      std::fprintf(stderr, "cache_worker: k%d: %s\n", i, out.message().c_str());
      return 1;
    }
    const bool elf = out->image.size() > 4 && out->image[0] == std::byte{0x7f} && out->image[1] == std::byte{'E'};
    std::printf("k%d %s %s %d\n", i, out->from_cache ? "hit" : "built", to_hex(sha256(out->image)).c_str(),
                elf ? 1 : 0);
  }
  return 0;
}
