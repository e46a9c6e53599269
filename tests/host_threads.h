// Host checks on several threads. The float64 references and per-element checks of the
// collective and GEMM tests are host work that grows with rows x N x K; on one core per
// rank they were most of gemm_rs_test's and gemm_test's run time. Each rank takes its share
// of the host's cores (the ranks of a test all run on this host), at most 16 threads.
// Header-only, std::thread; the checked functions must be pure (no CUDA calls, no shared
// writes).
#ifndef IRIS_TEST_HOST_THREADS_H
#define IRIS_TEST_HOST_THREADS_H
#include <stddef.h>
#include <string>
#include <thread>
#include <vector>

// threads for one rank: this host's cores shared by `ranks` processes, 1..16
static inline int host_threads(int ranks) {
  const unsigned cores = std::thread::hardware_concurrency();
  int t = cores ? (int)(cores / (unsigned)(ranks > 0 ? ranks : 1)) : 1;
  return t < 1 ? 1 : t > 16 ? 16 : t;
}

// Runs fn(begin, end, why) over [0, n) cut into `threads` contiguous ranges, one thread
// each; fn returns false (and sets why) at the first failure of its range. Returns true
// when every range passed, else false with `why` of the lowest failing range (the same
// message a single-threaded pass would give). Small n runs on this thread.
template <typename F>
static bool host_ranges(size_t n, int threads, size_t min_per_thread, F fn, std::string &why) {
  if (threads > 1 && n / (size_t)threads < min_per_thread) threads = (int)(n / (min_per_thread ? min_per_thread : 1));
  if (threads <= 1) return fn((size_t)0, n, why);
  const size_t chunk = (n + (size_t)threads - 1) / (size_t)threads;
  std::vector<std::string> whys((size_t)threads);
  std::vector<char> oks((size_t)threads, 1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; t++) {
    const size_t b = (size_t)t * chunk, e = b + chunk < n ? b + chunk : n;
    if (b >= e) break;
    pool.emplace_back([&, t, b, e] { oks[(size_t)t] = fn(b, e, whys[(size_t)t]) ? 1 : 0; });
  }
  for (std::thread &th : pool) th.join();
  for (int t = 0; t < threads; t++)
    if (!oks[(size_t)t]) { why = whys[(size_t)t]; return false; }
  return true;
}

#endif
