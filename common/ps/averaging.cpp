#include "common/ps/averaging.hpp"

namespace pstrain {

float AveragingScale(int gradients, int iter_size, float clip) {
  return clip / static_cast<float>(gradients * iter_size);
}

}  // namespace pstrain
