// SPDX-License-Identifier: Apache-2.0
// The committed malformed corpus (tests/data/malformed, described in its README and
// MANIFEST.txt): every file is read like a user's input, then every image is decompressed and
// its kernels listed. Controls must read cleanly; every other file must give an error that
// names the file and contains the documented text. Nothing may crash (the asan preset runs this).
#include <archguard/container.hpp>
#include <archguard/fatbin.hpp>

#include <catch2/catch.hpp>

#include "corpus_lines.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

using namespace archguard;

namespace {

const std::string kDir = std::string(ARCHGUARD_SOURCE_DIR) + "/tests/data/malformed/";

std::vector<std::string> all_errors(const std::string& name) {
  std::vector<std::string> errors;
  auto r = scan_path(kDir + name);
  if (!r) return {r.message()};
  errors = r->errors;
  for (const auto& o : r->objects)
    for (const auto& fb : o.fatbins)
      for (const auto& e : fb.entries) {
        if (e.kind == CodeKind::ltoir) continue;
        auto image = decompress(e, o.path);
        if (!image) {
          errors.push_back(image.message());
          continue;
        }
        auto k = list_kernels(e, *image, o.path);
        if (!k) errors.push_back(k.message());
      }
  return errors;
}

}  // namespace

TEST_CASE("malformed corpus: errors, never crashes", "[fatbin][corpus]") {
  int files = 0;
  for (const std::string& line : corpus_lines(kDir + "MANIFEST.txt")) {
    const auto bar1 = line.find('|');
    const auto bar2 = line.find('|', bar1 + 1);
    REQUIRE(bar2 != std::string::npos);
    const std::string name = line.substr(0, bar1);
    const std::string expect = line.substr(bar1 + 1, bar2 - bar1 - 1);
    ++files;
    INFO(name << ": " << line.substr(bar2 + 1));
    const auto errors = all_errors(name);
    if (expect == "ok") {
      CHECK(errors.empty());
      for (const auto& e : errors) UNSCOPED_INFO(e);
      continue;
    }
    REQUIRE_FALSE(errors.empty());
    INFO("error: " << errors.front());
    CHECK(errors.front().find(name) != std::string::npos);    // names the file
    CHECK(errors.front().find(expect) != std::string::npos);  // says what is wrong
    CHECK(errors.front().back() != '.');                      // house style: no final period
  }
  CHECK(files >= 40);
}

TEST_CASE("controls decode to the documented images and kernels", "[fatbin][corpus]") {
  auto r = scan_path(kDir + "valid.o");
  REQUIRE(r.ok());
  REQUIRE(r->objects.size() == 1);
  const auto& fbs = r->objects[0].fatbins;
  REQUIRE(fbs.size() == 1);
  const auto& e = fbs[0].entries;
  REQUIRE(e.size() == 3);
  CHECK(e[0].kind == CodeKind::sass);
  CHECK(e[1].kind == CodeKind::ptx);
  CHECK(e[1].compression == Compression::lz4);
  CHECK(e[1].options == "-O3");
  CHECK(e[2].compression == Compression::zstd);
  CHECK(e[2].identifier == "kernels.cu");
  for (const auto& entry : e) {
    auto image = decompress(entry, "valid.o");
    REQUIRE(image.ok());
    auto k = list_kernels(entry, *image, "valid.o");
    REQUIRE(k.ok());
    REQUIRE(k->size() == 1);  // the cubin's plain device function is not an entry
    CHECK((*k)[0].demangled == "kernel(float*)");
  }
  auto a = scan_path(kDir + "valid.a");
  REQUIRE(a.ok());
  REQUIRE(a->objects.size() == 1);
  CHECK(a->objects[0].path == kDir + "valid.a:valid.o");
  CHECK(a->objects[0].member == "valid.o");
}

TEST_CASE("a directory named through a symbolic link is walked; links below it are not followed", "[fatbin][corpus]") {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("archguard-walk-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "tree");
  fs::create_directory_symlink(kDir, tmp / "linked");          // as /usr/local/cuda/lib64 -> lib
  fs::create_directory_symlink(kDir, tmp / "tree" / "inner");  // a link inside a walked tree
  auto direct = scan_path(kDir);
  auto linked = scan_path((tmp / "linked").string());
  auto tree = scan_path((tmp / "tree").string());
  fs::remove_all(tmp);
  REQUIRE(direct.ok());
  REQUIRE(linked.ok());
  REQUIRE(tree.ok());
  CHECK(linked->directory);
  CHECK(linked->objects.size() == direct->objects.size());
  CHECK(linked->objects.size() > 0);
  for (const auto& e : linked->errors) CHECK(e.find("cannot read the directory") == std::string::npos);
  CHECK(tree->objects.empty());  // not followed: the same files would be listed twice
  CHECK(tree->errors.empty());
}
