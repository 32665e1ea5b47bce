// Winograd F(2x2, 3x3) convolution for ConvolutionLayer's "winograd" CPU
// implementation (3x3 kernel, stride 1, no dilation, pad 0-2, any group).
//
// Every 2x2 block ("tile") of the output is computed from the 4x4 input patch
// under it with 16 element-wise products instead of 36 multiply-adds (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2015):
//   Y = A^T [ (G w G^T) (.) (B^T d B) ] A
// The 16 products of all tiles and channels become 16 GEMMs per group (BLAS),
// output x channel by channel x tile, so the multiply count drops by 2.25 (less
// where the output size is odd: the last tile row and column are half used).
// The two gradients are the same bilinear form read the other way round
// (transposition of the algorithm):
//   d = B [ U (.) (A dY A^T) ] B^T          (bottom gradient, tiles overlap: added)
//   w = G^T [ (A dY A^T) (.) (B^T d B) ] G  (weight gradient, summed over tiles)
// Layouts: transformed input V [group][16][channel][tile], transformed weights
// U [group][16][output][channel], products M [group][16][output][tile]; a tile
// index runs over images, tile rows, tile columns.
#pragma once

#include <cstdint>
#include <vector>

namespace pstrain {

struct ConvGeometry;

// Whether `g` is a convolution WinogradConv computes.
bool WinogradApplies(const ConvGeometry& g);

class WinogradConv {
 public:
  // One bottom (N, C, H, W) with geometry `g` (WinogradApplies) and output
  // out_h x out_w.
  WinogradConv(const ConvGeometry& g, int num, int channels, int height, int width, int out_h,
               int out_w);

  // dst = conv(src, weights) + bias (bias may be null).
  void Forward(const float* src, const float* weights, const float* bias, float* dst);
  // Any output may be null (not wanted). src_diff is overwritten; weight_diff
  // and bias_diff are added to. `src_as_forwarded`: src is the one the last
  // Forward read, unchanged since, so its transform may be reused.
  void Backward(const float* src, const float* weights, const float* dst_diff, float* src_diff,
                float* weight_diff, float* bias_diff, bool src_as_forwarded);

 private:
  void TransformWeights(const float* weights);   // -> u_
  void TransformInput(const float* src);         // -> v_
  void TransformDstDiff(const float* dst_diff);  // -> m_

  int num_, channels_, height_, width_, out_h_, out_w_;
  int num_output_, group_, pad_h_, pad_w_;
  int g_c_, g_out_;          // channels and outputs per group
  int tiles_h_, tiles_w_;    // tiles per image, each axis
  int64_t tiles_ = 0;        // tiles of the batch (the GEMMs' tile axis)
  int padded_h_, padded_w_;  // one image with its zero border (pad before, the rest after)
  std::vector<float> u_, v_, m_;
  bool v_is_forwarded_ = false;  // v_ holds the last Forward's transformed input
  std::vector<float> stage_;     // one padded image, or one output's transformed weights
};

}  // namespace pstrain
