#include "worker/ps/host_group.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

namespace pstrain {

namespace {

constexpr int kMaxMembers = 255;  // workers besides the leader
constexpr size_t kHeaderBytes = 16384;

// The segment's path, for UnlinkOnTerm: a job's processes end with SIGTERM
// (ps-train's stop, or PR_SET_PDEATHSIG when ps-train or a DistributedSolver's
// script is killed), and the segment must not outlive the job in /dev/shm.
char g_segment_path[300];

void UnlinkOnTerm(int sig) {
  if (g_segment_path[0] != '\0') unlink(g_segment_path);  // async-signal-safe
  signal(sig, SIG_DFL);
  raise(sig);
}

// Once per process: SIGTERM (left at its default action by ps-worker) removes
// the segment, then terminates as before.
void RemoveOnTerm(const std::string& name) {
  std::snprintf(g_segment_path, sizeof g_segment_path, "/dev/shm%s", name.c_str());
  struct sigaction old {};
  if (sigaction(SIGTERM, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;
  struct sigaction on_term {};
  on_term.sa_handler = UnlinkOnTerm;
  sigemptyset(&on_term.sa_mask);
  sigaction(SIGTERM, &on_term, nullptr);
}

}  // namespace

// The segment's first kHeaderBytes; every value starts zero (ftruncate).
struct HostGroup::Header {
  std::atomic<uint64_t> shape;        // values << 16 | members + 1, set by the first opener
  std::atomic<uint32_t> leader_bell;  // members add 1 after a gradient or a join request
  std::atomic<uint32_t> member_bell;  // the leader adds 1 after weights or join answers
  std::atomic<int64_t> weights_iter;  // 1 + the iteration of the weights held; 0: none yet
  std::atomic<int64_t> weights_version;
  std::atomic<int64_t> grad_stamp[kMaxMembers];     // 1 + the iteration of the slot's gradient
  std::atomic<uint32_t> join_request[kMaxMembers];  // a member adds 1 when it starts
  std::atomic<uint32_t> join_answer[kMaxMembers];   // the leader copies the request it answered
};
static_assert(sizeof(HostGroup::Header) <= kHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              std::atomic<uint32_t>::is_always_lock_free);

Result<std::unique_ptr<HostGroup>> HostGroup::Open(const HostGroupOptions& options,
                                                   int64_t values) {
  const std::string where = "host group " + options.name + ": ";
  if (options.name.size() < 2 || options.name.size() > 250 || options.name[0] != '/' ||
      options.name.find('/', 1) != std::string::npos) {
    return Status::InvalidArgument(where +
                                   "the name must be /NAME (no other '/', at most 250 "
                                   "characters)");
  }
  const std::vector<int>& ranks = options.ranks;
  if (ranks.size() < 2 || ranks.size() > kMaxMembers + 1 ||
      !std::is_sorted(ranks.begin(), ranks.end()) ||
      std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end() || ranks[0] < 0) {
    return Status::InvalidArgument(where + "the ranks must be 2 to " +
                                   std::to_string(kMaxMembers + 1) +
                                   " distinct worker ranks in ascending order");
  }
  const auto me = std::find(ranks.begin(), ranks.end(), options.rank);
  if (me == ranks.end()) {
    return Status::InvalidArgument(where + "worker " + std::to_string(options.rank) +
                                   " is not one of the group's ranks");
  }
  if (values < 0 || values > (int64_t{1} << 46)) {
    return Status::InvalidArgument(where + "bad parameter size " + std::to_string(values));
  }
  std::unique_ptr<HostGroup> g(new HostGroup());
  g->options_ = options;
  g->slot_ = static_cast<int>(me - ranks.begin()) - 1;
  g->values_ = values;
  const size_t floats = static_cast<size_t>(values) * ranks.size();  // member slots + weights
  g->bytes_ = kHeaderBytes + floats * sizeof(float);

  const int fd = shm_open(options.name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IOError(where + "cannot open: " + std::strerror(errno));
  struct stat st {};
  Status status = Status::Ok();
  if (fstat(fd, &st) != 0) {
    status = Status::IOError(where + "cannot stat: " + std::strerror(errno));
  } else if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    status = Status::FailedPrecondition(where + "owned by uid " + std::to_string(st.st_uid) +
                                        " with mode " + mode +
                                        ": not this user's private "
                                        "segment (uid " +
                                        std::to_string(geteuid()) + ", mode 0600); refused");
  } else if (st.st_size != 0 && static_cast<size_t>(st.st_size) != g->bytes_) {
    status = Status::InvalidArgument(where + "holds " + std::to_string(st.st_size) +
                                     " bytes, this group needs " + std::to_string(g->bytes_) +
                                     " (another job's segment?)");
  } else if (st.st_size == 0 && ftruncate(fd, static_cast<off_t>(g->bytes_)) != 0) {
    status = Status::IOError(where + "cannot size it: " + std::strerror(errno));
  }
  if (!status.ok()) {
    close(fd);
    return status;
  }
  void* base = mmap(nullptr, g->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return Status::IOError(where + "cannot map: " + std::strerror(errno));
  g->base_ = base;
  g->header_ = static_cast<Header*>(base);
  RemoveOnTerm(options.name);
  const uint64_t shape = static_cast<uint64_t>(values) << 16 | (ranks.size());
  uint64_t seen = 0;
  if (!g->header_->shape.compare_exchange_strong(seen, shape) && seen != shape) {
    return Status::InvalidArgument(where + "was made for " + std::to_string(seen & 0xffff) +
                                   " workers and " + std::to_string(seen >> 16) +
                                   " values, this group has " + std::to_string(ranks.size()) +
                                   " and " + std::to_string(values));
  }
  return g;
}

HostGroup::~HostGroup() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

float* HostGroup::slot_data(int member) const {
  return reinterpret_cast<float*>(static_cast<char*>(base_) + kHeaderBytes) +
         static_cast<size_t>(member) * static_cast<size_t>(values_);
}

float* HostGroup::weights_data() const {
  return slot_data(static_cast<int>(options_.ranks.size()) - 1);
}

void HostGroup::Sleep(std::atomic<uint32_t>* word, uint32_t seen,
                      std::chrono::steady_clock::time_point deadline) const {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  // FUTEX_WAIT (not _PRIVATE): the word lives in memory other processes map.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void HostGroup::Wake(std::atomic<uint32_t>* word) const {
  word->fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

namespace {

std::string WorkerName(int rank) { return "worker " + std::to_string(rank); }

}  // namespace

Status HostGroup::Join(int64_t* iter) {
  Header& h = *header_;
  const uint32_t request = h.join_request[slot_].load() + 1;
  h.join_request[slot_].store(request);
  Wake(&h.leader_bell);
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  while (true) {
    const uint32_t bell = h.member_bell.load(std::memory_order_acquire);
    if (h.join_answer[slot_].load(std::memory_order_acquire) == request) {
      *iter = h.weights_iter.load(std::memory_order_acquire) - 1;
      return Status::Ok();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::DeadlineExceeded(WorkerName(options_.rank) + ": its host group's leader, " +
                                      WorkerName(options_.ranks[0]) + ", did not let it join " +
                                      "within " + std::to_string(options_.timeout.count()) +
                                      " ms (" + options_.name + ")");
    }
    Sleep(&h.member_bell, bell, deadline);
  }
}

Status HostGroup::ReadWeights(int64_t iter, const std::vector<Blob*>& blobs, int64_t* version) {
  Header& h = *header_;
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  while (true) {
    const uint32_t bell = h.member_bell.load(std::memory_order_acquire);
    const int64_t held = h.weights_iter.load(std::memory_order_acquire) - 1;
    if (held == iter) break;
    if (held > iter) {
      return Status::Unavailable(WorkerName(options_.rank) +
                                 " waits for the weights of "
                                 "iteration " +
                                 std::to_string(iter) +
                                 " but its host group's "
                                 "leader, " +
                                 WorkerName(options_.ranks[0]) +
                                 ", holds those "
                                 "of " +
                                 std::to_string(held) + ": restart to join again");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::DeadlineExceeded(
          WorkerName(options_.rank) + ": its host group's leader, " +
          WorkerName(options_.ranks[0]) + ", published no weights for iteration " +
          std::to_string(iter) + " within " + std::to_string(options_.timeout.count()) + " ms");
    }
    Sleep(&h.member_bell, bell, deadline);
  }
  const float* from = weights_data();
  for (Blob* b : blobs) {
    std::memcpy(b->mutable_cpu_data(), from, static_cast<size_t>(b->count()) * sizeof(float));
    from += b->count();
  }
  *version = h.weights_version.load(std::memory_order_acquire);
  return Status::Ok();
}

Status HostGroup::PublishGradient(int64_t iter, const std::vector<Blob*>& blobs) {
  float* to = slot_data(slot_);
  for (Blob* b : blobs) {
    std::memcpy(to, b->cpu_diff(), static_cast<size_t>(b->count()) * sizeof(float));
    to += b->count();
  }
  header_->grad_stamp[slot_].store(iter + 1, std::memory_order_release);
  Wake(&header_->leader_bell);
  return Status::Ok();
}

Status HostGroup::PublishWeights(int64_t iter, int64_t version, const std::vector<Blob*>& blobs) {
  float* to = weights_data();
  for (Blob* b : blobs) {
    std::memcpy(to, b->cpu_data(), static_cast<size_t>(b->count()) * sizeof(float));
    to += b->count();
  }
  header_->weights_version.store(version, std::memory_order_release);
  header_->weights_iter.store(iter + 1, std::memory_order_release);
  Wake(&header_->member_bell);
  return Status::Ok();
}

void HostGroup::AnswerJoins() {
  Header& h = *header_;
  bool answered = false;
  for (int m = 0; m + 1 < static_cast<int>(options_.ranks.size()); ++m) {
    const uint32_t request = h.join_request[m].load(std::memory_order_acquire);
    if (request == h.join_answer[m].load()) continue;
    h.grad_stamp[m].store(0);  // a slot of its earlier run is not this run's
    h.join_answer[m].store(request, std::memory_order_release);
    answered = true;
  }
  if (answered) Wake(&h.member_bell);
}

Status HostGroup::SumGradients(int64_t iter, const std::vector<Blob*>& blobs) {
  Header& h = *header_;
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  for (int m = 0; m + 1 < static_cast<int>(options_.ranks.size()); ++m) {
    while (true) {
      const uint32_t bell = h.leader_bell.load(std::memory_order_acquire);
      AnswerJoins();
      if (h.grad_stamp[m].load(std::memory_order_acquire) == iter + 1) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        return Status::DeadlineExceeded(
            WorkerName(options_.ranks[0]) +
            " (host group leader): " + WorkerName(options_.ranks[static_cast<size_t>(m) + 1]) +
            " gave no gradient for iteration " + std::to_string(iter) + " within " +
            std::to_string(options_.timeout.count()) + " ms (is it running?)");
      }
      Sleep(&h.leader_bell, bell, deadline);
    }
    const float* from = slot_data(m);
    for (Blob* b : blobs) {
      float* diff = b->mutable_cpu_diff();
      const int64_t n = b->count();
      for (int64_t i = 0; i < n; ++i) diff[i] += from[i];
      from += n;
    }
  }
  return Status::Ok();
}

void HostGroup::Unlink() {
  if (leader()) shm_unlink(options_.name.c_str());
}

}  // namespace pstrain
