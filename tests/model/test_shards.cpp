// A batch split into shards, as the ranks of a data-parallel run split it
// (train/distributed.h): each shard's dropout masks and drop-path draws are those the whole
// batch draws for its images, and the shards' scaled gradients add up to the whole batch's gradient.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gradcheck.h"
#include "minivit/model/train_step.h"
#include "minivit/model/vit.h"
#include "minivit/nn/cross_entropy.h"

using namespace minivit;
using namespace minivit_test;

namespace {

ModelConfig shard_model() {
  ModelConfig c;
  c.image_size = 8;
  c.channels = 1;
  c.patch_size = 4;
  c.dim = 16;
  c.depth = 2;
  c.heads = 2;
  c.mlp_dim = 24;
  c.num_classes = 3;
  c.dropout = 0.3f;
  c.attention_dropout = 0.3f;
  c.drop_path = 0.5f;  // the second block's rate
  return c;
}

}  // namespace

TEST_CASE("a shard's dropout masks and gradients are the whole batch's share", "[model][shards]") {
  const ModelConfig c = shard_model();
  constexpr int B = 7, first = 4, rest = B - first;  // shards of 4 and 3 images
  const int64_t image_len = int64_t(c.channels) * c.image_size * c.image_size;
  const auto images = random_vector(B * image_len, 1.0f, 11);
  std::vector<int32_t> labels(B);
  for (int b = 0; b < B; ++b) labels[size_t(b)] = b % c.num_classes;
  std::vector<float> targets(size_t(B) * c.num_classes);
  make_targets(targets.data(), labels.data(), B, c.num_classes, 0.1f);
  const uint64_t key = 12345;

  ViT model(c);
  model.init(5);
  Activations whole(c, B, ActivationsFor::training), part(c, B, ActivationsFor::training);

  StepResult all = shard_gradients(model, whole, images.data(), targets.data(), labels.data(), B,
                                   key, 0, B);
  const std::vector<float> grad_all(model.grads.begin(), model.grads.end());

  // The second shard alone, placed at its offset: the same masks as the whole batch drew
  // for those images.
  StepResult tail = shard_gradients(model, part, images.data() + first * image_len,
                                    targets.data() + first * c.num_classes, labels.data() + first,
                                    rest, key, first, B);
  const std::vector<float> grad_tail(model.grads.begin(), model.grads.end());
  for (int l = 0; l < c.depth; ++l) {
    const BlockActivations& w = whole.blocks[size_t(l)];
    const BlockActivations& p = part.blocks[size_t(l)];
    const int T = c.tokens(), D = c.dim, M = c.mlp_dim, H = c.heads;
    auto same = [&](const uint8_t* a, const uint8_t* b, int64_t per_image) {
      return std::equal(b, b + rest * per_image, a + first * per_image);
    };
    CHECK(same(w.att_mask, p.att_mask, int64_t(H) * T * T));
    CHECK(same(w.proj_mask, p.proj_mask, int64_t(T) * D));
    CHECK(same(w.gelu_mask, p.gelu_mask, int64_t(T) * M));
    CHECK(same(w.fc2_mask, p.fc2_mask, int64_t(T) * D));
    if (l > 0) {  // the first block's drop-path rate is 0: it draws nothing
      CHECK(std::equal(p.path_scale_att, p.path_scale_att + rest, w.path_scale_att + first));
      CHECK(std::equal(p.path_scale_mlp, p.path_scale_mlp + rest, w.path_scale_mlp + first));
    }
  }

  StepResult head = shard_gradients(model, part, images.data(), targets.data(), labels.data(),
                                    first, key, 0, B);
  // Scaled by shard / B, the shards' gradients add up to the whole batch's.
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < grad_all.size(); ++i) {
    const double sum = double(model.grads[i]) + grad_tail[i];
    diff += (sum - grad_all[i]) * (sum - grad_all[i]);
    norm += double(grad_all[i]) * grad_all[i];
  }
  CHECK(std::sqrt(diff / norm) < 1e-5);
  CHECK((head.loss * first + tail.loss * rest) / B == Approx(all.loss).epsilon(1e-5));
  CHECK(head.correct + tail.correct == all.correct);
}
