// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runs independent work items on a few threads. Internal to the library and the tools.
#include <algorithm>
#include <atomic>
#include <exception>
#include <cstddef>
#include <thread>
#include <vector>

namespace archguard::common {

/// The threads to use: `requested`, or the hardware concurrency when 0; at most `cap`.
inline unsigned thread_count(unsigned requested, unsigned cap = 256) {
  const unsigned n = requested != 0 ? requested : std::max(1u, std::thread::hardware_concurrency());
  return std::min(n, cap);
}

/// Calls fn(i) for every i in [0, n), on at most `threads` threads (the calling thread is one
/// of them), items handed out in order one at a time. fn must not throw. Results go into
/// slots the caller indexes by i, so the output does not depend on scheduling.
template <class F>
void parallel_for(std::size_t n, unsigned threads, F&& fn) {
  threads = static_cast<unsigned>(std::min<std::size_t>(std::max(1u, threads), std::max<std::size_t>(1, n)));
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (unsigned t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work);
    } catch (...) {
      break;  // no more threads to be had: the ones running (this one at least) do the rest
    }
  }
  work();
  for (auto& t : pool) t.join();
}

}  // namespace archguard::common
