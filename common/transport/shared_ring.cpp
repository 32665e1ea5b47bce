#include "common/transport/shared_ring.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace pstrain::transport {
namespace {

using Clock = std::chrono::steady_clock;

// The memfd: a header, the slot states (0 free, 1 held by the receivers,
// 2 taken by one), the slots' places as the sender wrote them, then the data.
constexpr char kRingMagic[8] = {'P', 'S', 'R', 'I', 'N', 'G', '0', '1'};
constexpr char kTrailerMagic[8] = {'P', 'S', 'T', 'R', 'S', 'H', 'M', '1'};
constexpr uint32_t kEntries = 4096;
constexpr size_t kPage = 4096;
constexpr size_t kSlotAlign = 64;
constexpr uint64_t kMaxDataBytes = uint64_t{1} << 32;
constexpr size_t kMappingsKept = 256;  // a ring per peer: far more than one machine runs

struct RingHeader {
  char magic[8];
  uint8_t token[16];
  uint64_t data_bytes;
  uint64_t data_offset;
  uint32_t entries;
  uint32_t reserved;
};
struct SlotPlace {
  uint64_t offset;
  uint64_t bytes;
};
static_assert(sizeof(RingHeader) <= 64);
static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free);

constexpr size_t kStatesAt = 64;
constexpr size_t kPlacesAt = kStatesAt + kEntries * sizeof(uint32_t);
constexpr size_t kDataAt = (kPlacesAt + kEntries * sizeof(SlotPlace) + kPage - 1) / kPage * kPage;

std::atomic<uint32_t>* States(unsigned char* base) {
  return reinterpret_cast<std::atomic<uint32_t>*>(base + kStatesAt);
}
SlotPlace* Places(unsigned char* base) { return reinterpret_cast<SlotPlace*>(base + kPlacesAt); }

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::string Name(const RingId& ring) {
  return "shared-memory ring of process " + std::to_string(ring.pid) + " (descriptor " +
         std::to_string(ring.fd) + ")";
}

template <typename T>
void Put(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}
template <typename T>
T Get(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof(value));
  return value;
}

constexpr size_t kTrailerFixed = 8 + 4 + 4 + 16 + 8 + 4;
constexpr size_t kTrailerSlot = 4 + 4 + 8 + 8;

}  // namespace

// --- trailer ------------------------------------------------------------------------------

std::string EncodeTrailer(const RingTrailer& trailer) {
  std::string out(kTrailerMagic, sizeof(kTrailerMagic));
  Put(&out, trailer.ring.pid);
  Put(&out, trailer.ring.fd);
  out.append(reinterpret_cast<const char*>(trailer.ring.token), sizeof(trailer.ring.token));
  Put(&out, trailer.ring.file_bytes);
  Put(&out, static_cast<uint32_t>(trailer.slots.size()));
  for (const RingSlot& s : trailer.slots) {
    Put(&out, s.frame);
    Put(&out, s.entry);
    Put(&out, s.offset);
    Put(&out, s.bytes);
  }
  return out;
}

bool LooksLikeTrailer(const void* bytes, size_t size) {
  return size >= sizeof(kTrailerMagic) &&
         std::memcmp(bytes, kTrailerMagic, sizeof(kTrailerMagic)) == 0;
}

Result<RingTrailer> DecodeTrailer(const void* bytes, size_t size) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  if (size < kTrailerFixed || !LooksLikeTrailer(bytes, size)) {
    return Status::Corruption("shared-memory trailer: " + std::to_string(size) +
                              " bytes is not a trailer");
  }
  RingTrailer t;
  t.ring.pid = Get<uint32_t>(p + 8);
  t.ring.fd = Get<int32_t>(p + 12);
  std::memcpy(t.ring.token, p + 16, sizeof(t.ring.token));
  t.ring.file_bytes = Get<uint64_t>(p + 32);
  const uint32_t count = Get<uint32_t>(p + 40);
  if ((size - kTrailerFixed) % kTrailerSlot != 0 ||
      (size - kTrailerFixed) / kTrailerSlot != count) {
    return Status::Corruption("shared-memory trailer: it lists " + std::to_string(count) +
                              " slots in " + std::to_string(size) + " bytes");
  }
  for (uint32_t i = 0; i < count; ++i) {
    const unsigned char* s = p + kTrailerFixed + i * kTrailerSlot;
    t.slots.push_back(RingSlot{Get<uint32_t>(s), Get<uint32_t>(s + 4), Get<uint64_t>(s + 8),
                               Get<uint64_t>(s + 16)});
  }
  return t;
}

// --- sender -------------------------------------------------------------------------------

Result<std::unique_ptr<SendRing>> SendRing::Create(size_t data_bytes) {
  data_bytes = RoundUp(std::max<size_t>(data_bytes, kPage), kPage);
  if (data_bytes > kMaxDataBytes) {
    return Status::InvalidArgument("a shared-memory ring holds at most 4 GiB, not " +
                                   std::to_string(data_bytes) + " bytes");
  }
  std::unique_ptr<SendRing> ring(new SendRing());
  const size_t file_bytes = kDataAt + data_bytes;
  int fd = memfd_create("pstrain-ring", MFD_CLOEXEC);
  if (fd < 0) return Status::IOError(Errno("cannot create a shared-memory ring: memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(file_bytes)) != 0) {
    Status error = Status::IOError(Errno("cannot size a shared-memory ring: ftruncate"));
    close(fd);
    return error;
  }
  void* base = mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Status error = Status::IOError(Errno("cannot map a shared-memory ring: mmap"));
    close(fd);
    return error;
  }
  ring->base_ = static_cast<unsigned char*>(base);
  ring->data_bytes_ = data_bytes;
  ring->id_.pid = static_cast<uint32_t>(getpid());
  ring->id_.fd = fd;
  ring->id_.file_bytes = file_bytes;
  if (getrandom(ring->id_.token, sizeof(ring->id_.token), 0) !=
      static_cast<ssize_t>(sizeof(ring->id_.token))) {
    return Status::IOError(Errno("cannot draw a shared-memory ring's token: getrandom"));
  }
  RingHeader header{};
  std::memcpy(header.magic, kRingMagic, sizeof(kRingMagic));
  std::memcpy(header.token, ring->id_.token, sizeof(header.token));
  header.data_bytes = data_bytes;
  header.data_offset = kDataAt;
  header.entries = kEntries;
  std::memcpy(ring->base_, &header, sizeof(header));  // the states start at 0 (free)
  return ring;
}

SendRing::~SendRing() {
  if (base_ != nullptr) munmap(base_, id_.file_bytes);
  if (id_.fd >= 0) close(id_.fd);
}

void SendRing::Reclaim() {
  std::atomic<uint32_t>* states = States(base_);
  while (!held_.empty() && states[held_.front().entry].load(std::memory_order_acquire) == 0) {
    held_.pop_front();
  }
}

std::optional<RingSlot> SendRing::Put(const void* data, size_t bytes) {
  Reclaim();
  const uint64_t size = RoundUp(bytes, kSlotAlign);
  std::optional<uint64_t> start;
  if (held_.empty()) {
    if (size <= data_bytes_) start = 0;
  } else {
    const uint64_t tail = held_.front().offset;
    if (head_ > tail) {
      if (data_bytes_ - head_ >= size) {
        start = head_;
      } else if (tail >= size) {
        start = 0;
      }
    } else if (tail - head_ >= size) {
      start = head_;
    }
  }
  const uint32_t entry = next_entry_;
  full_ = !start || held_.size() == kEntries;  // every entry held, next_entry_ too
  if (full_) return std::nullopt;
  std::memcpy(base_ + kDataAt + *start, data, bytes);
  Places(base_)[entry] = SlotPlace{*start, bytes};
  States(base_)[entry].store(1, std::memory_order_release);
  held_.push_back(Held{entry, *start, Clock::now()});
  next_entry_ = (entry + 1) % kEntries;
  head_ = *start + size;
  return RingSlot{0, entry, *start, bytes};
}

bool SendRing::Stuck(std::chrono::milliseconds patience) const {
  return full_ && !held_.empty() && Clock::now() - held_.front().since > patience;
}

// --- receiver -----------------------------------------------------------------------------

struct RingReader::Mapping {
  RingId id;
  unsigned char* base = nullptr;
  uint64_t data_bytes = 0;
  ~Mapping() {
    if (base != nullptr) munmap(base, id.file_bytes);
  }
  bool Is(const RingId& other) const {
    return id.pid == other.pid && id.fd == other.fd && id.file_bytes == other.file_bytes &&
           std::memcmp(id.token, other.token, sizeof(id.token)) == 0;
  }
};

RingReader::~RingReader() = default;

Result<std::shared_ptr<RingReader::Mapping>> RingReader::Map(const RingId& ring) {
  for (size_t i = mappings_.size(); i-- > 0;) {
    if (!mappings_[i]->Is(ring)) continue;
    std::shared_ptr<Mapping> found = mappings_[i];
    if (i + 1 != mappings_.size()) {  // most recently used last
      mappings_.erase(mappings_.begin() + static_cast<std::ptrdiff_t>(i));
      mappings_.push_back(found);
    }
    return found;
  }
  const std::string name = Name(ring);
  if (ring.fd < 0 || ring.file_bytes < kDataAt + kPage ||
      ring.file_bytes > kDataAt + kMaxDataBytes) {
    return Status::InvalidArgument(name + ": not a ring (" + std::to_string(ring.file_bytes) +
                                   " bytes)");
  }
  const std::string path = "/proc/" + std::to_string(ring.pid) + "/fd/" + std::to_string(ring.fd);
  // Not blocking, not a controlling terminal: whatever the descriptor is, opening it
  // has no effect before it is checked to be a ring.
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return Status::Unavailable(name + ": " + Errno(("cannot open " + path).c_str()));
  struct stat st {};
  const bool stat_ok = fstat(fd, &st) == 0;
  if (!stat_ok || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      static_cast<uint64_t>(st.st_size) != ring.file_bytes) {
    close(fd);
    return Status::InvalidArgument(name + ": " + path + " is not this user's ring of " +
                                   std::to_string(ring.file_bytes) + " bytes");
  }
  void* base = mmap(nullptr, ring.file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the memory
  if (base == MAP_FAILED) return Status::IOError(name + ": " + Errno("mmap"));
  auto mapping = std::make_shared<Mapping>();
  mapping->id = ring;
  mapping->base = static_cast<unsigned char*>(base);
  RingHeader header;
  std::memcpy(&header, base, sizeof(header));
  if (std::memcmp(header.magic, kRingMagic, sizeof(kRingMagic)) != 0 ||
      std::memcmp(header.token, ring.token, sizeof(ring.token)) != 0 ||
      header.entries != kEntries || header.data_offset != kDataAt ||
      header.data_bytes != ring.file_bytes - kDataAt) {
    return Status::Corruption(name + ": its header does not match the message's token and size");
  }
  mapping->data_bytes = header.data_bytes;
  mappings_.push_back(mapping);
  if (mappings_.size() > kMappingsKept) mappings_.erase(mappings_.begin());
  return mapping;
}

Result<Payload> RingReader::Take(const RingId& ring, const RingSlot& slot) {
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<Mapping> mapping, Map(ring));
  const std::string where = Name(ring) + ": slot " + std::to_string(slot.entry);
  if (slot.entry >= kEntries) return Status::InvalidArgument(where + ": no such slot");
  if (slot.bytes == 0 || slot.bytes % sizeof(float) != 0 || slot.offset % kSlotAlign != 0 ||
      slot.offset > mapping->data_bytes || slot.bytes > mapping->data_bytes - slot.offset) {
    return Status::InvalidArgument(where + ": " + std::to_string(slot.bytes) + " bytes at " +
                                   std::to_string(slot.offset) + " do not fit the ring's " +
                                   std::to_string(mapping->data_bytes));
  }
  const SlotPlace place = Places(mapping->base)[slot.entry];
  if (place.offset != slot.offset || place.bytes != slot.bytes) {
    return Status::Corruption(where + ": the message's place differs from the ring's");
  }
  uint32_t held = 1;
  if (!States(mapping->base)[slot.entry].compare_exchange_strong(held, 2,
                                                                 std::memory_order_acquire)) {
    return Status::Corruption(where + ": not held for a receiver (state " + std::to_string(held) +
                              ")");
  }
  unsigned char* data = mapping->base + kDataAt + slot.offset;
  const uint32_t entry = slot.entry;
  std::shared_ptr<const void> owner(data, [mapping, entry](const void*) {
    States(mapping->base)[entry].store(0, std::memory_order_release);
  });
  return Payload{std::move(owner), reinterpret_cast<const float*>(data),
                 static_cast<size_t>(slot.bytes / sizeof(float))};
}

}  // namespace pstrain::transport
