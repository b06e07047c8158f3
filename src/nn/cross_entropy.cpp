#include "minivit/nn/cross_entropy.h"

#include <cmath>

namespace minivit {

float cross_entropy_forward(float* probs, const float* logits, const float* targets, int B,
                            int K) {
  double total = 0.0;
  for (int b = 0; b < B; ++b) {
    const float* z = logits + int64_t(b) * K;
    float* p = probs + int64_t(b) * K;
    float maxv = z[0];
    for (int k = 1; k < K; ++k) maxv = z[k] > maxv ? z[k] : maxv;
    double sum = 0.0;
    for (int k = 0; k < K; ++k) sum += std::exp(double(z[k] - maxv));
    const double log_sum = std::log(sum);
    double loss = 0.0;
    for (int k = 0; k < K; ++k) {
      const double log_p = double(z[k] - maxv) - log_sum;  // log-softmax without exp underflow
      p[k] = float(std::exp(log_p));
      loss -= double(targets[int64_t(b) * K + k]) * log_p;
    }
    total += loss;
  }
  return float(total / B);
}

void cross_entropy_backward(float* dlogits, const float* probs, const float* targets, int B,
                            int K) {
  const float inv_b = 1.0f / B;
  for (int64_t i = 0; i < int64_t(B) * K; ++i) dlogits[i] += (probs[i] - targets[i]) * inv_b;
}

void make_targets(float* targets, const int32_t* labels, int B, int K, float smoothing) {
  const float off = smoothing / K;
  for (int b = 0; b < B; ++b) {
    float* t = targets + int64_t(b) * K;
    for (int k = 0; k < K; ++k) t[k] = off;
    t[labels[b]] += 1.0f - smoothing;
  }
}

}  // namespace minivit
