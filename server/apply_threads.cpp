#include "server/apply_threads.hpp"

#include <algorithm>

namespace pstrain::server {

ApplyThreads::ApplyThreads(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { Work(i); });
}

ApplyThreads::~ApplyThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int ApplyThreads::Parts(size_t n) const {
  const size_t by_size = std::max<size_t>(1, n / kMinPerThread);
  return static_cast<int>(std::min<size_t>(by_size, static_cast<size_t>(threads())));
}

void ApplyThreads::Range(size_t n, int parts, int part, size_t* begin, size_t* end) {
  // Equal shares rounded to 16 values; the last part takes the rest.
  const size_t share = (n / static_cast<size_t>(parts) + 15) / 16 * 16;
  *begin = std::min(n, share * static_cast<size_t>(part));
  *end = part + 1 == parts ? n : std::min(n, *begin + share);
}

void ApplyThreads::ForRanges(size_t n,
                             const std::function<void(int part, size_t begin, size_t end)>& fn) {
  const int parts = Parts(n);
  if (parts == 1) {
    fn(0, 0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    n_ = n;
    parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  wake_.notify_all();
  size_t begin = 0, end = 0;
  Range(n, parts, 0, &begin, &end);
  fn(0, begin, end);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ApplyThreads::Work(int index) {
  unsigned seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= parts_) continue;  // this job needs fewer threads
    const auto* job = job_;
    const size_t n = n_;
    const int parts = parts_;
    lock.unlock();
    size_t begin = 0, end = 0;
    Range(n, parts, index, &begin, &end);
    (*job)(index, begin, end);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace pstrain::server
