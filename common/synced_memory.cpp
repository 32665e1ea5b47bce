#include "common/synced_memory.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace pstrain {

SyncedMemory::SyncedMemory(size_t count) : count_(count) {}

SyncedMemory::~SyncedMemory() { std::free(host_); }

void SyncedMemory::AllocateHost() {
  if (host_ != nullptr || count_ == 0) return;
  size_t bytes = (count_ * sizeof(float) + 63) / 64 * 64;
  host_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (host_ == nullptr) throw std::bad_alloc();
  std::memset(host_, 0, bytes);
}

const float* SyncedMemory::host_data() {
  AllocateHost();
  return host_;
}

float* SyncedMemory::mutable_host_data() {
  AllocateHost();
  return host_;
}

}  // namespace pstrain
