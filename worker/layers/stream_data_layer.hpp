// StreamDataLayer: the base of the data layers that read their samples as a
// stream addressed by global step (ImageData, HDF5Data, WindowData). Forward
// delivers step next_batch() and moves on; SeekToBatch jumps (a resumed run,
// a test pass); the first failure to read is the layer's RuntimeStatus and
// stays (no later batch is delivered). A subclass reads one step's batch in
// ReadBatch and says where in its stream that batch began.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/layer.hpp"

namespace pstrain {

class StreamDataLayer : public Layer {
 public:
  using Layer::Layer;

  bool IsDataSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  Status RuntimeStatus() const override { return status_; }
  void SeekToBatch(int64_t t) override { next_batch_ = t; }
  int64_t DeliveredFirstSample() const override { return delivered_first_; }

 protected:
  // Fills `top` with global step t's batch and calls set_delivered_first.
  // An error stops the stream (RuntimeStatus) and that batch is not delivered.
  virtual Status ReadBatch(int64_t t, const BlobVec& top) = 0;
  // Call at the end of LayerSetUp: the stream starts at the net's start_iter.
  void StartStream() {
    next_batch_ = context().start_iter;
    delivered_first_ = -1;
    status_ = Status::Ok();
  }
  // The stream position of the first sample of the batch just read.
  void set_delivered_first(int64_t position) { delivered_first_ = position; }

  void ForwardReference(const BlobVec& /*bottom*/, const BlobVec& top) override {
    if (!status_.ok()) return;
    if (Status s = ReadBatch(next_batch_, top); !s.ok()) {
      status_ = s;
      return;
    }
    ++next_batch_;
  }
  void BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}

 private:
  int64_t next_batch_ = 0;
  int64_t delivered_first_ = -1;
  Status status_;
};

}  // namespace pstrain
