// SPDX-License-Identifier: Apache-2.0
#pragma once
// A FactsStore in memory for the results-cache tests: the opaque records (a file's facts, a
// judgement, a walked tree) kept by key, counted, and handed back through an optional edit (a
// record cut short or altered). Embedded finds and kernel lists are never kept. Safe to call
// from several threads (doctor reads and judges on threads of its own).
#include <archguard/fatbin.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace archguard::test {

/// The records of one kind.
struct Records {
  std::map<std::string, std::vector<std::byte>> records;
  std::function<void(std::vector<std::byte>&)> edit;
  std::size_t asked = 0, found = 0, kept = 0;
  std::mutex mutex;
  std::optional<std::vector<std::byte>> find(const std::string& key) {
    const std::lock_guard lock(mutex);
    ++asked;
    auto it = records.find(key);
    if (it == records.end()) return std::nullopt;
    ++found;
    auto bytes = it->second;
    if (edit) edit(bytes);
    return bytes;
  }
  void keep(const std::string& key, std::vector<std::byte> bytes) {
    const std::lock_guard lock(mutex);
    ++kept;
    records[key] = std::move(bytes);
  }
  void clear() {
    records.clear();
    asked = found = kept = 0;
  }
};

struct MemoryStore final : FactsStore {
  Records files, judgements, trees;
  std::optional<EmbeddedFinds> find_embedded(const std::string&) override { return std::nullopt; }
  void keep_embedded(const std::string&, const EmbeddedFinds&) override {}
  StoredKernelLists find_kernels(const std::string&) override { return {}; }
  void keep_kernels(const std::string&, const StoredKernelLists&) override {}
  void count(std::uint64_t, std::uint64_t) override {}
  std::optional<std::vector<std::byte>> find_file(const std::string& key) override { return files.find(key); }
  void keep_file(const std::string& key, std::vector<std::byte> b) override { files.keep(key, std::move(b)); }
  std::optional<std::vector<std::byte>> find_judgement(const std::string& key) override { return judgements.find(key); }
  void keep_judgement(const std::string& key, std::vector<std::byte> b) override { judgements.keep(key, std::move(b)); }
  std::optional<std::vector<std::byte>> find_tree(const std::string& key) override { return trees.find(key); }
  void keep_tree(const std::string& key, std::vector<std::byte> b) override { trees.keep(key, std::move(b)); }
};

}  // namespace archguard::test
