#include "server/factor_arrival.hpp"

#include "common/ps/sufficient_factors.hpp"

namespace pstrain::server {

void FactorArrival::Prepare(const transport::InMessage& message, const KeyPlacement& placement,
                            Incoming* incoming, ApplyThreads* threads) {
  if (threads != threads_) {
    threads_ = threads;
    if (threads == nullptr) {
      rebuild_.set_row_ranges({});
    } else {
      // The pool splits values (rows x values_per_row) at multiples of 16;
      // a row belongs to the range its first value falls in.
      rebuild_.set_row_ranges([threads](int64_t rows, int64_t values_per_row,
                                        const std::function<void(int64_t, int64_t)>& run) {
        const auto per_row = static_cast<size_t>(values_per_row);
        threads->ForRanges(static_cast<size_t>(rows) * per_row,
                           [&](int, size_t begin, size_t end) {
                             const auto a = static_cast<int64_t>((begin + per_row - 1) / per_row);
                             const auto b = static_cast<int64_t>((end + per_row - 1) / per_row);
                             if (a < b) run(a, b);
                           });
      });
    }
  }
  const pstrain::Header& h = message.header;
  const pstrain::FactorShape& f = h.factors();
  const size_t samples = f.samples();
  incoming->wire_bytes = static_cast<int64_t>(message.payload_bytes(0) + message.payload_bytes(1));
  const float* left =
      DecodeFactors(h.dtype(), message.payload(0), samples * (f.row_end() - f.row_begin()), &left_);
  const float* right = DecodeFactors(h.dtype(), message.payload(1), samples * f.cols(), &right_);
  rebuild_.Rebuild(h, left, right, placement, &incoming->payloads);
  incoming->factor_left = message.payload(0);
  incoming->factor_right = message.payload(1);
  incoming->factor_dtype = h.dtype();
  incoming->header.set_dtype(pstrain::FLOAT32);  // the payloads: rebuilt float32 chunks
}

void TakePayloads(transport::InMessage& message, Incoming* incoming) {
  const bool compressed = message.header.dtype() != pstrain::FLOAT32;
  if (compressed) incoming->wire_bytes = 0;
  for (size_t i = 0; i < message.payload_count(); ++i) {
    incoming->payloads.push_back(message.mutable_payload(i));
    if (!compressed) continue;
    incoming->payload_bytes.push_back(message.payload_bytes(i));
    incoming->wire_bytes += static_cast<int64_t>(message.payload_bytes(i));
  }
}

}  // namespace pstrain::server
