// InnerProduct's own vectorised CPU kernels (InnerProductLayer's "vector"
// implementation) for few rows: X [M, K] times Caffe's weight layout W [N, K]
// (not transposed), M small (a deploy or small-batch net: AlexNet b10's fc6
// is 10 x 9216 times 4096 x 9216). There the product is bound by reading W
// (151 MB for fc6), and a GEMM library that packs W into panels first reads
// and writes it more than once; these kernels stream every row of W from
// memory once per pass, in its own layout, with no copy:
//   forward         Y = X W^T (+ b): per block of rows of W, dot products
//                   with blocks of rows of X, vectors along K;
//   backward data   dX = dY W: per block of rows of W, each row of dX
//                   updated with that block's terms (dX stays in cache);
//   backward weight dW += dY^T X: per block of rows of dW, read, add the M
//                   terms, written once.
// Tile sizes follow the vector registers of the variant (cpu_kernel_isa.hpp).
// Sums run in another order than BLAS's: results agree with the reference to
// rounding. Each output element is computed by one thread in a fixed order,
// so the results do not depend on the thread count (SetCpuThreads).
#pragma once

namespace pstrain {

struct FcShape {
  int m = 0;  // rows of X and Y
  int n = 0;  // outputs: rows of W
  int k = 0;  // inputs: columns of X and W
};

// y[M, N] = x[M, K] w[N, K]^T, plus bias[N] on every row when bias is not null.
// REQUIRES: no buffer aliases another.
void FcForward(const FcShape& shape, const float* x, const float* w, const float* bias, float* y);
// dx[M, K] = dy[M, N] w[N, K] (overwritten). REQUIRES: dx aliases neither input.
void FcBackwardData(const FcShape& shape, const float* dy, const float* w, float* dx);
// dw[N, K] += dy[M, N]^T x[M, K] (accumulated). REQUIRES: dw aliases neither input.
void FcBackwardWeights(const FcShape& shape, const float* dy, const float* x, float* dw);

}  // namespace pstrain
