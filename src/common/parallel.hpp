// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runs independent work items on a few threads. Internal to the library and the tools.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
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

/// Threads shared by every caller of the process, kept for its life: parallel_for started new
/// threads on each call, which cost a large object's judging in `check` (16 threads judging
/// objects, each starting up to 15 more per large object: 300 threads for the toolkit's 17
/// libraries, each new one with empty decode buffers and a new decoder to fault in). A caller
/// hands its items to the pool, runs them too, and returns when all are done; the pool's
/// threads take items of the oldest batch first.
class SharedPool {
 public:
  /// The process's pool, of `threads` - 1 threads at most (the first call's count, grown by a
  /// later call that asks for more).
  static SharedPool& process() {
    static SharedPool* pool = new SharedPool;  // never destroyed: its threads end with the process
    return *pool;
  }

  /// Calls fn(i) for every i in [0, n) on the calling thread and up to `threads` - 1 of the
  /// pool's; returns when all are done. fn must not throw.
  void run(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn) {
    if (n == 0) return;
    auto batch = std::make_shared<Batch>();
    batch->fn = &fn;
    batch->n = n;
    const std::size_t helpers = std::min<std::size_t>(std::max(1u, threads) - 1, n - 1);
    if (helpers > 0) {
      std::lock_guard<std::mutex> lock(m_);
      while (pool_.size() < helpers) {
        try {
          pool_.emplace_back([this] { work(); });
          pool_.back().detach();
        } catch (...) {
          break;  // no more threads to be had: the caller does the rest
        }
      }
      queue_.push_back(batch);
    }
    if (helpers > 0) wake_.notify_all();
    batch->drain();
    std::unique_lock<std::mutex> lock(batch->m);
    batch->all_done.wait(lock, [&] { return batch->done == batch->n; });
  }

 private:
  struct Batch {
    const std::function<void(std::size_t)>* fn = nullptr;
    std::size_t n = 0;
    std::atomic<std::size_t> next{0};
    std::mutex m;
    std::condition_variable all_done;
    std::size_t done = 0;  ///< items finished, under m
    /// Runs items of this batch until none is left to take.
    void drain() {
      std::size_t ran = 0;
      for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n; ++ran) (*fn)(i);
      if (ran == 0) return;
      std::lock_guard<std::mutex> lock(m);
      done += ran;
      if (done == n) all_done.notify_all();
    }
    bool taken() const { return next.load(std::memory_order_relaxed) >= n; }
  };

  void work() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      while (!queue_.empty() && queue_.front()->taken()) queue_.pop_front();
      if (queue_.empty()) {
        wake_.wait(lock);
        continue;
      }
      std::shared_ptr<Batch> batch = queue_.front();
      lock.unlock();
      batch->drain();
      lock.lock();
    }
  }

  std::mutex m_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Batch>> queue_;
  std::vector<std::thread> pool_;
};

}  // namespace archguard::common
