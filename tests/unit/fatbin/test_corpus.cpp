// SPDX-License-Identifier: Apache-2.0
// The committed malformed corpus (tests/data/malformed, described in its README and
// MANIFEST.txt): every file is read like a user's input, then every image is decompressed and
// its kernels listed. Controls must read cleanly; every other file must give an error that
// names the file and contains the documented text. Nothing may crash (the asan preset runs this).
#include <archguard/container.hpp>
#include <archguard/fatbin.hpp>

#include <catch2/catch.hpp>

#include "corpus_lines.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
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

TEST_CASE("a directory walk lists its files in path order, names that sort around '/' included", "[fatbin][corpus]") {
  // Each directory's entries are merged by name, a subdirectory by its name and "/": "a-b/x"
  // comes before "a/x" ('-' < '/'), "a.c" before "a/x", "a/x" before "a0", bytes over 0x7f
  // last. The objects must come out as a sort of every path gives them, on any thread count.
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("archguard-order-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  const std::vector<std::string> paths = {"a/x.a", "a-b/x.a", "a.c", "a0", "a/b/c.a", "a/b-c.a", "a/b.a", "a/b/-.a",
                                          "A/x.a", "\xc3\xa9/x.a", "a/\xc3\xa9.a", "ab/x.a", "a b/x.a", "a!.a", "z", "a/b/c/d/e.a"};
  for (const auto& rel : paths) {
    fs::create_directories((tmp / rel).parent_path());
    fs::copy_file(kDir + "valid.a", tmp / rel);
  }
  std::vector<std::string> expected;
  for (const auto& rel : paths) expected.push_back((tmp / rel).string() + ":valid.o");
  std::sort(expected.begin(), expected.end());
  for (unsigned threads : {1u, 3u}) {
    INFO(threads << " threads");
    ScanOptions options;
    options.threads = threads;
    auto r = scan_path(tmp.string(), options);
    REQUIRE(r.ok());
    std::vector<std::string> got;
    for (const auto& o : r->objects) got.push_back(o.path);
    CHECK(got == expected);
  }
  fs::remove_all(tmp);
}

TEST_CASE("a directory walk on several threads reports what a walk on one thread reports", "[fatbin][corpus]") {
  // 40 directories in 4 levels, each holding copies of corpus files (objects, errors and notes),
  // hard links between levels and symbolic links out of the tree: on 1, 2, 3 and 16 threads the
  // report is the same, entry by entry and in the same order.
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("archguard-pwalk-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  const std::vector<std::string> samples = {"valid.a", "elf32.o", "bad-magic.fatbin", "truncated-15.fatbin", "README.md"};
  unsigned n = 0;
  for (unsigned a = 0; a < 4; ++a)
    for (unsigned b = 0; b < 3; ++b)
      for (unsigned c = 0; c < 3; ++c) {
        const fs::path dir = tmp / ("a" + std::to_string(a)) / ("b" + std::to_string(b)) / ("c" + std::to_string(c));
        fs::create_directories(dir);
        const std::string& s = samples[n++ % samples.size()];
        fs::copy_file(kDir + s, dir / s);
        if (n % 4 == 0) fs::create_hard_link(dir / s, tmp / ("a" + std::to_string(a)) / ("link" + std::to_string(n) + "-" + s));
        if (n % 5 == 0) fs::create_symlink(kDir + "valid.a", dir / "out.a");
        if (n % 7 == 0) fs::create_directory_symlink(kDir, dir / "outdir");
      }
  // Directories whose paths grow past PATH_MAX cannot be opened (a walk error each, in walk
  // order, even for root): made with mkdirat from a descriptor of the parent.
  for (const char* top : {"a0/b1", "a2/b0/c2", "a3"}) {
    int fd = ::open((tmp / top).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    for (unsigned depth = 0; depth < 24; ++depth) {
      const std::string leaf(200, static_cast<char>('k' + depth % 10));
      REQUIRE(::mkdirat(fd, leaf.c_str(), 0755) == 0);
      const int next = ::openat(fd, leaf.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      ::close(fd);
      REQUIRE(next >= 0);
      fd = next;
    }
    ::close(fd);
  }
  auto walk = [&](unsigned threads) {
    ScanOptions options;
    options.threads = threads;
    return scan_path(tmp.string(), options);
  };
  const auto one = walk(1);
  REQUIRE(one.ok());
  CHECK(one->objects.size() > 5);
  CHECK(one->errors.size() > 5);
  CHECK(std::count_if(one->errors.begin(), one->errors.end(), [](const std::string& e) {
          return e.find("cannot read the directory: File name too long") != std::string::npos;
        }) == 3);
  CHECK(one->skipped.size() > 5);
  for (unsigned threads : {2u, 3u, 16u}) {
    INFO(threads << " threads");
    const auto many = walk(threads);
    REQUIRE(many.ok());
    CHECK(many->files_read == one->files_read);
    CHECK(many->errors == one->errors);
    CHECK(many->skipped == one->skipped);
    REQUIRE(many->objects.size() == one->objects.size());
    for (std::size_t i = 0; i < one->objects.size(); ++i) CHECK(many->objects[i].path == one->objects[i].path);
  }
  // Handed over file by file (ScanOptions::each_file), however far ahead the threads may read:
  // the same objects in the same order, one call at a time, each file's part dropped once
  // handed over, and the same counts, errors and notes left in the report.
  for (unsigned threads : {1u, 2u, 3u, 16u})
    for (std::size_t ahead : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
      INFO(threads << " threads, " << ahead << " ahead");
      ScanOptions options;
      options.threads = threads;
      options.stream_ahead = ahead;
      std::vector<std::string> paths;
      std::vector<std::weak_ptr<const Storage>> handed;
      std::atomic<int> inside{0};
      int most_inside = 0, alive_at_a_call = 0;
      options.each_file = [&](ScanReport& part) {
        most_inside = std::max(most_inside, ++inside);
        for (const auto& w : handed) alive_at_a_call += w.expired() ? 0 : 1;
        CHECK(!part.objects.empty());
        CHECK(part.errors.empty());
        for (const auto& o : part.objects) {
          CHECK(o.path.rfind(part.input, 0) == 0);
          paths.push_back(o.path);
        }
        for (const auto& st : part.storage) handed.push_back(st);
        --inside;
      };
      const auto streamed = scan_path(tmp.string(), options);
      REQUIRE(streamed.ok());
      CHECK(streamed->objects.empty());
      CHECK(streamed->storage.empty());
      CHECK(most_inside == 1);
      CHECK(alive_at_a_call == 0);
      CHECK(streamed->files_read == one->files_read);
      CHECK(streamed->errors == one->errors);
      CHECK(streamed->skipped == one->skipped);
      REQUIRE(paths.size() == one->objects.size());
      for (std::size_t i = 0; i < paths.size(); ++i) CHECK(paths[i] == one->objects[i].path);
    }
  // remove_all cannot name paths past PATH_MAX: rm can
  CHECK(std::system(("rm -rf '" + tmp.string() + "'").c_str()) == 0);
  std::error_code ec;
  CHECK(!fs::exists(tmp, ec));
}

TEST_CASE("a shared walk is made once and handed to every reader of its directory", "[fatbin][walk]") {
  const auto dir = std::filesystem::temp_directory_path() / ("archguard-shared-walk-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "b");
  std::ofstream(dir / "a.txt") << "a\n";
  std::ofstream(dir / "b" / "c.txt") << "c\n";
  const auto paths = [](const std::vector<ListedFile>& files) {
    std::vector<std::string> out;
    for (const auto& f : files) out.push_back(f.path);
    return out;
  };
  std::vector<std::string> errors;
  const std::vector<std::string> both{(dir / "a.txt").string(), (dir / "b" / "c.txt").string()};
  SharedWalk walk(dir.string());
  CHECK(paths(list_files(dir.string(), 2, errors, &walk)) == both);
  CHECK(paths(list_files(dir.string(), 2, errors)) == both);
  // A file removed after the walk: a reader of the shared walk still gets it (the walk is not
  // made again), a reader on its own does not; scan_path reads what the shared walk found.
  std::filesystem::remove(dir / "b" / "c.txt");
  CHECK(paths(list_files(dir.string(), 3, errors, &walk)) == both);
  CHECK(paths(list_files(dir.string(), 3, errors)) == std::vector<std::string>{both.front()});
  ScanOptions shared;
  shared.walk = &walk;
  auto with = scan_path(dir.string(), shared);
  auto without = scan_path(dir.string());
  REQUIRE(with.ok());
  REQUIRE(without.ok());
  CHECK(without->errors.empty());
  REQUIRE(with->errors.size() == 1);
  CHECK(with->errors.front().find((dir / "b" / "c.txt").string()) != std::string::npos);
  // Another directory's walk is not used.
  CHECK(paths(list_files((dir / "b").string(), 2, errors, &walk)).empty());
  CHECK(errors.empty());
  std::filesystem::remove_all(dir);
}
