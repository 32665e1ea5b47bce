#include "worker/layers/conv_winograd.hpp"

#include <algorithm>

#include "common/math_cpu.hpp"
#include "worker/layers/conv_layer.hpp"

namespace pstrain {

bool WinogradApplies(const ConvGeometry& g) {
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 &&
         g.dilation_h == 1 && g.dilation_w == 1 && g.pad_h >= 0 && g.pad_h <= 2 && g.pad_w >= 0 &&
         g.pad_w <= 2;
}

WinogradConv::WinogradConv(const ConvGeometry& g, int num, int channels, int height, int width,
                           int out_h, int out_w)
    : num_(num),
      channels_(channels),
      height_(height),
      width_(width),
      out_h_(out_h),
      out_w_(out_w),
      num_output_(g.num_output),
      group_(g.group),
      pad_h_(g.pad_h),
      pad_w_(g.pad_w),
      g_c_(channels / g.group),
      g_out_(g.num_output / g.group),
      tiles_h_((out_h + 1) / 2),
      tiles_w_((out_w + 1) / 2) {
  tiles_ = static_cast<int64_t>(num) * tiles_h_ * tiles_w_;
  // The tiles' input patches span 2 tiles + 2 rows and columns from -pad on.
  padded_h_ = std::max(2 * tiles_h_ + 2, height_ + pad_h_);
  padded_w_ = std::max(2 * tiles_w_ + 2, width_ + pad_w_);
}

// U = G w G^T per (output, channel): G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1].
// One output's channels at a time, staged so that each of the 16 planes gets one
// contiguous run.
void WinogradConv::TransformWeights(const float* weights) {
  u_.resize(static_cast<size_t>(group_) * 16 * g_out_ * g_c_);
  stage_.resize(static_cast<size_t>(16) * g_c_);
  const int64_t plane = static_cast<int64_t>(g_out_) * g_c_;  // one of the 16 per group
  for (int g = 0; g < group_; ++g) {
    float* u = u_.data() + static_cast<int64_t>(g) * 16 * plane;
    for (int k = 0; k < g_out_; ++k) {
      const float* wk = weights + (static_cast<int64_t>(g) * g_out_ + k) * g_c_ * 9;
      for (int c = 0; c < g_c_; ++c) {
        const float* w = wk + c * 9;
        float t[4][3];  // G w
        for (int j = 0; j < 3; ++j) {
          t[0][j] = w[j];
          t[1][j] = 0.5f * (w[j] + w[3 + j] + w[6 + j]);
          t[2][j] = 0.5f * (w[j] - w[3 + j] + w[6 + j]);
          t[3][j] = w[6 + j];
        }
        for (int i = 0; i < 4; ++i) {  // (G w) G^T
          stage_[(i * 4 + 0) * g_c_ + c] = t[i][0];
          stage_[(i * 4 + 1) * g_c_ + c] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
          stage_[(i * 4 + 2) * g_c_ + c] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
          stage_[(i * 4 + 3) * g_c_ + c] = t[i][2];
        }
      }
      for (int x = 0; x < 16; ++x) {
        std::copy_n(stage_.data() + x * g_c_, g_c_, u + x * plane + static_cast<int64_t>(k) * g_c_);
      }
    }
  }
}

// V = B^T d B per (channel, tile), d the 4x4 input patch (zero outside the
// image): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
void WinogradConv::TransformInput(const float* src) {
  v_.resize(static_cast<size_t>(group_) * 16 * g_c_ * tiles_);
  stage_.assign(static_cast<size_t>(padded_h_) * padded_w_, 0.f);  // the border stays zero
  const int64_t plane = static_cast<int64_t>(g_c_) * tiles_;
  const int64_t image = static_cast<int64_t>(height_) * width_;
  for (int n = 0; n < num_; ++n) {
    for (int cg = 0; cg < channels_; ++cg) {
      const int g = cg / g_c_;
      const float* im = src + (static_cast<int64_t>(n) * channels_ + cg) * image;
      float* v = v_.data() + static_cast<int64_t>(g) * 16 * plane +
                 static_cast<int64_t>(cg - g * g_c_) * tiles_ +
                 static_cast<int64_t>(n) * tiles_h_ * tiles_w_;
      // The image inside a zero border: every tile's 4x4 patch is in it.
      for (int r = 0; r < height_; ++r) {
        std::copy_n(im + static_cast<int64_t>(r) * width_, width_,
                    stage_.data() + (r + pad_h_) * padded_w_ + pad_w_);
      }
      for (int th = 0; th < tiles_h_; ++th) {
        for (int tw = 0; tw < tiles_w_; ++tw, ++v) {
          const float* patch = stage_.data() + 2 * th * padded_w_ + 2 * tw;
          float d[4][4];
          for (int i = 0; i < 4; ++i) {
            for (int j = 0; j < 4; ++j) d[i][j] = patch[i * padded_w_ + j];
          }
          float t[4][4];  // B^T d
          for (int j = 0; j < 4; ++j) {
            t[0][j] = d[0][j] - d[2][j];
            t[1][j] = d[1][j] + d[2][j];
            t[2][j] = d[2][j] - d[1][j];
            t[3][j] = d[1][j] - d[3][j];
          }
          for (int i = 0; i < 4; ++i) {  // (B^T d) B
            v[(i * 4 + 0) * plane] = t[i][0] - t[i][2];
            v[(i * 4 + 1) * plane] = t[i][1] + t[i][2];
            v[(i * 4 + 2) * plane] = t[i][2] - t[i][1];
            v[(i * 4 + 3) * plane] = t[i][1] - t[i][3];
          }
        }
      }
    }
  }
}

// Z = A dY A^T per (output, tile), dY the 2x2 output block (zero beyond the
// output): A = [1 0; 1 1; 1 -1; 0 -1]. Same layout as the forward's products.
void WinogradConv::TransformDstDiff(const float* dst_diff) {
  m_.resize(static_cast<size_t>(group_) * 16 * g_out_ * tiles_);
  const int64_t plane = static_cast<int64_t>(g_out_) * tiles_;
  const int64_t image = static_cast<int64_t>(out_h_) * out_w_;
  for (int n = 0; n < num_; ++n) {
    for (int kg = 0; kg < num_output_; ++kg) {
      const int g = kg / g_out_;
      const float* dy = dst_diff + (static_cast<int64_t>(n) * num_output_ + kg) * image;
      float* z = m_.data() + static_cast<int64_t>(g) * 16 * plane +
                 static_cast<int64_t>(kg - g * g_out_) * tiles_ +
                 static_cast<int64_t>(n) * tiles_h_ * tiles_w_;
      for (int th = 0; th < tiles_h_; ++th) {
        for (int tw = 0; tw < tiles_w_; ++tw, ++z) {
          float y[2][2];
          for (int i = 0; i < 2; ++i) {
            for (int j = 0; j < 2; ++j) {
              const int r = 2 * th + i, c = 2 * tw + j;
              y[i][j] = (r < out_h_ && c < out_w_) ? dy[r * out_w_ + c] : 0.f;
            }
          }
          float t[4][2];  // A dY
          for (int j = 0; j < 2; ++j) {
            t[0][j] = y[0][j];
            t[1][j] = y[0][j] + y[1][j];
            t[2][j] = y[0][j] - y[1][j];
            t[3][j] = -y[1][j];
          }
          for (int i = 0; i < 4; ++i) {  // (A dY) A^T
            z[(i * 4 + 0) * plane] = t[i][0];
            z[(i * 4 + 1) * plane] = t[i][0] + t[i][1];
            z[(i * 4 + 2) * plane] = t[i][0] - t[i][1];
            z[(i * 4 + 3) * plane] = -t[i][1];
          }
        }
      }
    }
  }
}

void WinogradConv::Forward(const float* src, const float* weights, const float* bias, float* dst) {
  TransformWeights(weights);
  TransformInput(src);
  v_is_forwarded_ = true;
  m_.resize(static_cast<size_t>(group_) * 16 * g_out_ * tiles_);
  const int64_t u_plane = static_cast<int64_t>(g_out_) * g_c_;
  const int64_t v_plane = static_cast<int64_t>(g_c_) * tiles_;
  const int64_t m_plane = static_cast<int64_t>(g_out_) * tiles_;
  for (int g = 0; g < group_; ++g) {
    for (int x = 0; x < 16; ++x) {
      const int64_t p = static_cast<int64_t>(g) * 16 + x;
      CpuGemm(Trans::kNo, Trans::kNo, g_out_, static_cast<int>(tiles_), g_c_, 1.f,
              u_.data() + p * u_plane, v_.data() + p * v_plane, 0.f, m_.data() + p * m_plane);
    }
  }
  // Y = A^T M A per (output, tile), A^T = [1 1 1 0; 0 1 -1 -1], plus the bias.
  const int64_t image = static_cast<int64_t>(out_h_) * out_w_;
  for (int n = 0; n < num_; ++n) {
    for (int kg = 0; kg < num_output_; ++kg) {
      const int g = kg / g_out_;
      const float b = bias != nullptr ? bias[kg] : 0.f;
      float* y = dst + (static_cast<int64_t>(n) * num_output_ + kg) * image;
      const float* m = m_.data() + static_cast<int64_t>(g) * 16 * m_plane +
                       static_cast<int64_t>(kg - g * g_out_) * tiles_ +
                       static_cast<int64_t>(n) * tiles_h_ * tiles_w_;
      for (int th = 0; th < tiles_h_; ++th) {
        for (int tw = 0; tw < tiles_w_; ++tw, ++m) {
          float s[2][4];  // A^T M
          for (int j = 0; j < 4; ++j) {
            const float m0 = m[(0 * 4 + j) * m_plane], m1 = m[(1 * 4 + j) * m_plane];
            const float m2 = m[(2 * 4 + j) * m_plane], m3 = m[(3 * 4 + j) * m_plane];
            s[0][j] = m0 + m1 + m2;
            s[1][j] = m1 - m2 - m3;
          }
          const int r0 = 2 * th, c0 = 2 * tw;
          for (int i = 0; i < 2 && r0 + i < out_h_; ++i) {  // (A^T M) A
            float* row = y + static_cast<int64_t>(r0 + i) * out_w_ + c0;
            row[0] = s[i][0] + s[i][1] + s[i][2] + b;
            if (c0 + 1 < out_w_) row[1] = s[i][1] - s[i][2] - s[i][3] + b;
          }
        }
      }
    }
  }
}

void WinogradConv::Backward(const float* src, const float* weights, const float* dst_diff,
                            float* src_diff, float* weight_diff, float* bias_diff,
                            bool src_as_forwarded) {
  const int64_t out_image = static_cast<int64_t>(out_h_) * out_w_;
  if (bias_diff != nullptr) {
    for (int n = 0; n < num_; ++n) {
      for (int kg = 0; kg < num_output_; ++kg) {
        const float* dy = dst_diff + (static_cast<int64_t>(n) * num_output_ + kg) * out_image;
        float sum = 0.f;
        for (int64_t i = 0; i < out_image; ++i) sum += dy[i];
        bias_diff[kg] += sum;
      }
    }
  }
  if (weight_diff == nullptr && src_diff == nullptr) return;
  TransformDstDiff(dst_diff);
  const int64_t u_plane = static_cast<int64_t>(g_out_) * g_c_;
  const int64_t v_plane = static_cast<int64_t>(g_c_) * tiles_;
  const int64_t m_plane = static_cast<int64_t>(g_out_) * tiles_;
  if (weight_diff != nullptr) {
    if (!src_as_forwarded || !v_is_forwarded_) {
      TransformInput(src);
      v_is_forwarded_ = false;  // not necessarily the forwarded bottom
    }
    u_.resize(static_cast<size_t>(group_) * 16 * u_plane);
    for (int g = 0; g < group_; ++g) {
      for (int x = 0; x < 16; ++x) {  // Q = Z V^T, into u_
        const int64_t p = static_cast<int64_t>(g) * 16 + x;
        CpuGemm(Trans::kNo, Trans::kYes, g_out_, g_c_, static_cast<int>(tiles_), 1.f,
                m_.data() + p * m_plane, v_.data() + p * v_plane, 0.f, u_.data() + p * u_plane);
      }
    }
    // dW += G^T Q G, G^T = [1 .5 .5 0; 0 .5 -.5 0; 0 .5 .5 1].
    for (int g = 0; g < group_; ++g) {
      const float* q = u_.data() + static_cast<int64_t>(g) * 16 * u_plane;
      for (int k = 0; k < g_out_; ++k) {
        for (int c = 0; c < g_c_; ++c) {
          const int64_t at = static_cast<int64_t>(k) * g_c_ + c;
          float t[3][4];  // G^T Q
          for (int j = 0; j < 4; ++j) {
            const float q0 = q[(0 * 4 + j) * u_plane + at], q1 = q[(1 * 4 + j) * u_plane + at];
            const float q2 = q[(2 * 4 + j) * u_plane + at], q3 = q[(3 * 4 + j) * u_plane + at];
            t[0][j] = q0 + 0.5f * (q1 + q2);
            t[1][j] = 0.5f * (q1 - q2);
            t[2][j] = 0.5f * (q1 + q2) + q3;
          }
          float* w = weight_diff + ((static_cast<int64_t>(g) * g_out_ + k) * g_c_ + c) * 9;
          for (int i = 0; i < 3; ++i) {  // (G^T Q) G
            w[i * 3 + 0] += t[i][0] + 0.5f * (t[i][1] + t[i][2]);
            w[i * 3 + 1] += 0.5f * (t[i][1] - t[i][2]);
            w[i * 3 + 2] += 0.5f * (t[i][1] + t[i][2]) + t[i][3];
          }
        }
      }
    }
  }
  if (src_diff == nullptr) return;
  TransformWeights(weights);
  v_.resize(static_cast<size_t>(group_) * 16 * v_plane);
  v_is_forwarded_ = false;  // about to hold the bottom gradient's products
  for (int g = 0; g < group_; ++g) {
    for (int x = 0; x < 16; ++x) {  // P = U^T Z, into v_
      const int64_t p = static_cast<int64_t>(g) * 16 + x;
      CpuGemm(Trans::kYes, Trans::kNo, g_c_, static_cast<int>(tiles_), g_out_, 1.f,
              u_.data() + p * u_plane, m_.data() + p * m_plane, 0.f, v_.data() + p * v_plane);
    }
  }
  // dX = sum over the tiles over it of B P B^T, B = [1 0 0 0; 0 1 -1 1; -1 1 1 0; 0 0 0 -1].
  const int64_t image = static_cast<int64_t>(height_) * width_;
  stage_.resize(static_cast<size_t>(padded_h_) * padded_w_);
  for (int n = 0; n < num_; ++n) {
    for (int cg = 0; cg < channels_; ++cg) {
      const int g = cg / g_c_;
      float* dx = src_diff + (static_cast<int64_t>(n) * channels_ + cg) * image;
      const float* p = v_.data() + static_cast<int64_t>(g) * 16 * v_plane +
                       static_cast<int64_t>(cg - g * g_c_) * tiles_ +
                       static_cast<int64_t>(n) * tiles_h_ * tiles_w_;
      // Summed over the zero-bordered image, whose inside is then dX.
      std::fill(stage_.begin(), stage_.end(), 0.f);
      for (int th = 0; th < tiles_h_; ++th) {
        for (int tw = 0; tw < tiles_w_; ++tw, ++p) {
          float t[4][4];  // B P
          for (int j = 0; j < 4; ++j) {
            const float p0 = p[(0 * 4 + j) * v_plane], p1 = p[(1 * 4 + j) * v_plane];
            const float p2 = p[(2 * 4 + j) * v_plane], p3 = p[(3 * 4 + j) * v_plane];
            t[0][j] = p0;
            t[1][j] = p1 - p2 + p3;
            t[2][j] = p1 + p2 - p0;
            t[3][j] = -p3;
          }
          float* patch = stage_.data() + 2 * th * padded_w_ + 2 * tw;
          for (int i = 0; i < 4; ++i) {  // (B P) B^T
            float* row = patch + i * padded_w_;
            row[0] += t[i][0];
            row[1] += t[i][1] - t[i][2] + t[i][3];
            row[2] += t[i][1] + t[i][2] - t[i][0];
            row[3] -= t[i][3];
          }
        }
      }
      for (int r = 0; r < height_; ++r) {
        std::copy_n(stage_.data() + (r + pad_h_) * padded_w_ + pad_w_, width_,
                    dx + static_cast<int64_t>(r) * width_);
      }
    }
  }
}

}  // namespace pstrain
