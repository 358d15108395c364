// SPDX-License-Identifier: Apache-2.0
// The bound on bytes decoded at once (DecodeBudget): it lives in the library, so every verb that
// decodes images (inspect --kernels, check, doctor, verify, run) is bounded, not only the one
// that first had it. The checks count bytes and who waited, never time: a thread that must wait
// is shown to wait by a flag it sets only after take() returns.
#include <archguard/fatbin.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "byte_builder.hpp"

using namespace archguard;
using namespace fatbin_test;

namespace {

/// A PTX entry of `text`, uncompressed, parsed from a fatbin built here; `keep` holds its bytes.
FatbinEntry ptx_entry(const std::string& text, Buf& keep) {
  Buf p = bytes_of(text);
  pad_to(p, 8);
  Buf e;
  put_entry_header(e, {.kind = 1, .payload_size = p.size(), .arch = 90, .flags = 0x1});
  e.insert(e.end(), p.begin(), p.end());
  keep = fatbin_around(e, kFatbinMagic);
  auto fbs = Fatbin::parse_all(keep, "budget.fatbin", FatbinSection::memory);
  REQUIRE(fbs.ok());
  REQUIRE(fbs->size() == 1);
  REQUIRE(fbs->at(0).entries.size() == 1);
  return fbs->at(0).entries.at(0);
}

/// A PTX entry of `bytes` (rounded up to whole 1 KiB comment lines) declaring one kernel `name`.
FatbinEntry padded_ptx_entry(std::size_t bytes, const std::string& name, Buf& keep) {
  std::string text = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry " + name + "()\n{\n  ret;\n}\n";
  const std::string line = "// " + std::string(1020, 'y') + "\n";
  text.reserve(bytes + line.size());
  while (text.size() < bytes) text += line;
  return ptx_entry(text, keep);
}

/// Decodes `e` on a thread of its own (checked to succeed); what that thread's scratch keeps
/// after the image.
std::size_t kept_after_decoding(const FatbinEntry& e) {
  bool ok = false;
  std::size_t kept = 0;
  std::thread t([&] {
    ok = decode_kernels(e, "kept.fatbin").ok();
    kept = decode_scratch_bytes();  // on the thread, after its image: what it keeps
  });
  t.join();
  CHECK(ok);  // on the calling thread
  return kept;
}

/// Waits (polling, bounded) until `cond` holds; false when it never did.
template <class F>
bool eventually(F cond) {
  for (int i = 0; i < 2000 && !cond(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return cond();
}

}  // namespace

TEST_CASE("a decode budget never holds more than its bound while several threads take from it", "[fatbin][budget]") {
  DecodeBudget budget(100);
  std::atomic<int> done{0}, wrong{0};  // Catch's assertions are not made on the threads
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        const auto ticket = budget.take(40);
        if (ticket.bytes() != 40) ++wrong;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      ++done;
    });
  for (auto& t : pool) t.join();
  CHECK(done == 8);
  CHECK(wrong == 0);
  CHECK(budget.in_use() == 0);
  CHECK(budget.peak() <= 100);  // two tickets of 40 fit, a third does not
  CHECK(budget.peak() >= 40);
}

TEST_CASE("an image larger than the budget is decoded alone, and the others wait for it", "[fatbin][budget]") {
  DecodeBudget budget(100);
  auto big = budget.take(500);  // nothing taken: it proceeds although it exceeds the bound
  CHECK(budget.in_use() == 500);
  std::atomic<bool> got{false};
  std::thread other([&] {
    const auto small = budget.take(1);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(got);              // a budget that let it in would have set the flag by now
  big = DecodeBudget::Ticket{};  // given back
  CHECK(eventually([&] { return got.load(); }));
  other.join();
  CHECK(budget.in_use() == 0);
  CHECK(budget.peak() == 500);
}

TEST_CASE("a take nested on the same thread is counted once and does not wait for itself", "[fatbin][budget]") {
  DecodeBudget budget(10);
  const auto outer = budget.take(10);
  const auto inner = budget.take(10);  // would wait forever if it were counted
  CHECK(inner.bytes() == 0);
  CHECK(budget.in_use() == 10);
  DecodeBudget other(10);  // another budget is not nested in this one
  CHECK(other.take(3).bytes() == 3);
}

TEST_CASE("the library's decoders take from the process budget", "[fatbin][budget]") {
  Buf keep;
  const FatbinEntry e = ptx_entry(".version 8.0\n.target sm_90\n.visible .entry kern()\n{\n ret;\n}\n", keep);
  CHECK(decode_footprint(e) == e.stored_size);
  DecodeBudget& process = DecodeBudget::process();
  REQUIRE(process.in_use() == 0);

  // decompress and decode_kernels on another thread wait while the budget is full.
  auto full = process.take(kDecodeBytesAtOnce);
  std::atomic<int> finished{0};
  std::vector<std::string> names;
  bool image_ok = false;  // Catch's assertions are made on this thread only
  std::thread worker([&] {
    image_ok = decompress(e, "budget.fatbin").ok();
    ++finished;
    auto kernels = decode_kernels(e, "budget.fatbin");
    if (kernels.ok())
      for (const auto& k : *kernels) names.push_back(k.name);
    ++finished;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(finished == 0);  // an unbounded decoder would have finished by now
  full = DecodeBudget::Ticket{};
  worker.join();
  CHECK(finished == 2);
  CHECK(image_ok);
  CHECK(names == std::vector<std::string>{"kern"});
  CHECK(process.in_use() == 0);

  // On the thread holding a ticket (the kernel listing of inspect --kernels holds one while it
  // decodes) the decoder does not wait for itself.
  const auto held = process.take(kDecodeBytesAtOnce);
  auto again = decode_kernels(e, "budget.fatbin");
  REQUIRE(again.ok());
  CHECK(again->size() == 1);
}

TEST_CASE("a raised budget lets a waiting taker in, and is put back when it ends", "[fatbin][budget]") {
  // Judging many objects on many threads raises the process budget (judging_decode_bytes): 32 MiB
  // per thread, never below the default nor above 512 MiB.
  CHECK(judging_decode_bytes(1) == kDecodeBytesAtOnce);
  CHECK(judging_decode_bytes(2) == kDecodeBytesAtOnce);
  CHECK(judging_decode_bytes(8) == (std::uint64_t{256} << 20));
  CHECK(judging_decode_bytes(16) == (std::uint64_t{512} << 20));
  CHECK(judging_decode_bytes(128) == (std::uint64_t{512} << 20));

  DecodeBudget& process = DecodeBudget::process();
  REQUIRE(process.most() == kDecodeBytesAtOnce);
  REQUIRE(process.in_use() == 0);
  const std::uint64_t big = kDecodeBytesAtOnce / 2 + 1;  // two do not fit in the default
  auto first = process.take(big);
  std::atomic<bool> got{false};
  std::thread other([&] {
    const auto second = process.take(big);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(got);  // waits under the default bound
  {
    const DecodeBudget::Raised raised(2 * kDecodeBytesAtOnce);
    CHECK(process.most() == 2 * kDecodeBytesAtOnce);
    CHECK(eventually([&] { return got.load(); }));  // woken by the raise, it fits now
    other.join();
    const DecodeBudget::Raised lower(kDecodeBytesAtOnce / 2);  // never lowers it
    CHECK(process.most() == 2 * kDecodeBytesAtOnce);
  }
  CHECK(process.most() == kDecodeBytesAtOnce);  // put back
  first = DecodeBudget::Ticket{};
  CHECK(process.in_use() == 0);
}

TEST_CASE("the decode buffers idle threads keep are given back on request, never while a thread decodes",
          "[fatbin][budget][scratch]") {
  // One entry point and 1 MiB of comments: decoded into a thread's buffers, which it keeps for
  // its next image (a buffer over 256 KiB is counted against the threads' 48 MiB together).
  std::string text = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry kept_k()\n{\n  ret;\n}\n";
  while (text.size() < (std::size_t{1} << 20)) text += "// " + std::string(76, 'x') + "\n";
  Buf keep;
  const FatbinEntry e = ptx_entry(text, keep);
  auto names = [&] {  // on the test's threads: no Catch assertion there
    auto k = decode_kernels(e, "scratch.fatbin");
    std::vector<std::string> out;
    if (!k.ok()) return std::vector<std::string>{"error: " + k.message()};
    for (const Kernel& kernel : *k) out.push_back(kernel.name);
    return out;
  };
  const std::vector<std::string> want{"kept_k"};

  release_decode_scratch();  // what this process's earlier cases left
  REQUIRE(decode_scratch_bytes() == 0);

  // A thread that decodes once and then stays alive, idle, as the shared pool's threads do.
  std::atomic<int> stage{0};
  std::vector<std::string> first, again;
  std::thread idle([&] {
    first = names();
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
    again = names();  // its buffers were unmapped under it: mapped again
    stage = 3;
  });
  REQUIRE(eventually([&] { return stage.load() == 1; }));
  CHECK(decode_scratch_bytes() >= (std::size_t{1} << 20));  // kept after the image
  release_decode_scratch();
  CHECK(decode_scratch_bytes() == 0);
  stage = 2;
  REQUIRE(eventually([&] { return stage.load() == 3; }));
  idle.join();  // its thread-local buffers leave with it
  CHECK(first == want);
  CHECK(again == want);
  CHECK(decode_scratch_bytes() == 0);

  // Releases while four threads decode: a buffer in use is skipped, never unmapped under its
  // decoder (each list stays right; AddressSanitizer sees the buffers as heap blocks).
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, decoded{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&] {
      while (!stop.load()) {
        auto k = decode_kernels(e, "scratch.fatbin");
        if (!k.ok() || k->size() != 1 || k->front().name != "kept_k") ++wrong;
        ++decoded;
      }
    });
  for (int i = 0; i < 200 || decoded.load() < 200; ++i) {
    release_decode_scratch();
    std::this_thread::yield();
  }
  stop = true;
  for (auto& t : pool) t.join();
  CHECK(wrong == 0);
  CHECK(decode_scratch_bytes() == 0);  // the threads ended; what they kept went with them
}

TEST_CASE("doctor lowers what the decode buffers keep, and never raises it so", "[fatbin][budget][scratch]") {
  REQUIRE(DecodeScratchKept::most() == kDecodeScratchKeptDefault);
  // One image between doctor's bound (16 MiB) and the default (48 MiB): 24 MiB of PTX.
  Buf keep;
  const FatbinEntry e = padded_ptx_entry(std::size_t{24} << 20, "mid_k", keep);
  release_decode_scratch();
  CHECK(kept_after_decoding(e) >= (std::size_t{24} << 20));  // within the default bound: kept
  {
    const DecodeScratchKept lowered(std::size_t{16} << 20, DecodeScratchKept::Bound::at_most);
    CHECK(DecodeScratchKept::most() == (std::size_t{16} << 20));
    const DecodeScratchKept higher(std::size_t{32} << 20, DecodeScratchKept::Bound::at_most);  // never raises it
    CHECK(DecodeScratchKept::most() == (std::size_t{16} << 20));
    CHECK(kept_after_decoding(e) < (std::size_t{16} << 20));  // over the lowered bound: unmapped after the image
  }
  CHECK(DecodeScratchKept::most() == kDecodeScratchKeptDefault);
  CHECK(decode_scratch_bytes() == 0);
}

TEST_CASE("a thread keeps a decode buffer between images within the bound, which check raises", "[fatbin][budget][scratch]") {
  CHECK(judging_scratch_kept_bytes(1) == kDecodeScratchKeptDefault);
  CHECK(judging_scratch_kept_bytes(4) == kDecodeScratchKeptDefault);
  CHECK(judging_scratch_kept_bytes(8) == (std::size_t{96} << 20));
  CHECK(judging_scratch_kept_bytes(16) == (std::size_t{192} << 20));
  CHECK(judging_scratch_kept_bytes(64) == (std::size_t{192} << 20));
  REQUIRE(DecodeScratchKept::most() == kDecodeScratchKeptDefault);

  // One image larger than the default bound: 56 MiB of PTX.
  Buf keep;
  const FatbinEntry e = padded_ptx_entry(std::size_t{56} << 20, "big_k", keep);
  release_decode_scratch();
  CHECK(kept_after_decoding(e) == 0);  // over the bound: unmapped after the image
  {
    const DecodeScratchKept raised(std::size_t{128} << 20);
    CHECK(DecodeScratchKept::most() == (std::size_t{128} << 20));
    const DecodeScratchKept lower(std::size_t{64} << 20);  // never lowers it
    CHECK(DecodeScratchKept::most() == (std::size_t{128} << 20));
    CHECK(kept_after_decoding(e) >= (std::size_t{56} << 20));  // within the raised bound: kept for the next image
  }
  CHECK(DecodeScratchKept::most() == kDecodeScratchKeptDefault);
  CHECK(decode_scratch_bytes() == 0);  // the thread ended: its buffers went with it

  // A thread that kept a buffer under the raised bound gives it back after its next image once
  // the bound is put back.
  std::atomic<int> stage{0};
  std::size_t after_first = 0, after_second = 0;
  bool ok_first = false, ok_second = false;
  std::optional<DecodeScratchKept> raised(std::in_place, std::size_t{128} << 20);
  std::thread t([&] {
    ok_first = decode_kernels(e, "kept.fatbin").ok();
    after_first = decode_scratch_bytes();
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
    ok_second = decode_kernels(e, "kept.fatbin").ok();
    after_second = decode_scratch_bytes();
  });
  REQUIRE(eventually([&] { return stage.load() == 1; }));
  raised.reset();
  stage = 2;
  t.join();
  CHECK(ok_first);
  CHECK(ok_second);
  CHECK(after_first >= (std::size_t{56} << 20));
  CHECK(after_second == 0);
}
