#pragma once
// The run configuration: TOML sections [model] [data] [optim] [train], as fixed by the
// contract. Every field has the default a user gets when the key is absent. Reading,
// checking and writing it as TOML is formats/config_file.h.
#include <cstdint>
#include <string>
#include <vector>

namespace minivit {

// Keys that pick one of a fixed set. A config file names each value by its enumerator's
// name ("cifar10", "sgd"); formats/config_file.h maps between the two.
enum class DataFormat { idx, cifar10, cifar100, folder };

// Which of a CIFAR-100 record's two label bytes becomes the label.
enum class Cifar100Label {
  fine,    // 100 classes
  coarse,  // 20 superclasses
};

// Where the tokens learn their place in the image from.
enum class PosEmbedKind {
  learned,   // a trained table (1, T, D), timm's default
  sincos2d,  // SimpleViT's fixed 2-D sine-cosine table: stored in checkpoints, never trained
  none,      // no position information
};

// What the patch embedding projects.
enum class PatchEmbedKind {
  linear,   // each patch's pixels, timm's Conv2d(C, D, P, stride P)
  shifted,  // each patch's pixels and those under it in the image shifted by half a patch
            // along each diagonal: 5 C channels (Lee et al.'s shifted patch tokenization)
  conv,     // a convolutional stem (Xiao et al.'s early convolutions): log2 P stride-2 3x3
            // convolutions, each followed by GELU, then a 1x1 projection to D
};

// What the head reads from the last block.
enum class PoolKind {
  cls,   // a learned CLS token, first in the sequence, through the final `norm`
  mean,  // the mean over the patch tokens, through `fc_norm`; no CLS token
  seq,   // CCT's sequence pooling (nn/seq_pool.h): every token through the final `norm`,
         // then their softmax-weighted sum by a learned score; no CLS token
};

// An automatic augmentation policy for the training images (data/trivial_augment.h).
enum class AutoAugment {
  none,
  trivial,  // TrivialAugment in its wide space (torchvision's TrivialAugmentWide)
};

enum class OptimizerKind { adamw, sgd };
enum class LrSchedule { cosine, constant };
// The score function of every attention layer (nn/attention.h).
enum class AttentionForm { scaled_dot, dot, additive, cosine, lsa };
// How the transformer blocks' matrix products are computed in training (kernels/gemm.h).
enum class Precision {
  fp32,  // fp32 throughout
  bf16,  // inputs rounded to bfloat16, products summed in fp32; weights, gradients and the
         // optimizer stay fp32 (mixed precision)
};

struct ModelConfig {
  int image_size = 28;
  int channels = 1;
  int patch_size = 4;
  int dim = 64;
  int depth = 6;
  int heads = 4;
  int mlp_dim = 128;
  float dropout = 0.0f;            // on the attention projection and both MLP outputs
  float attention_dropout = 0.0f;  // on the softmax attention weights
  // Stochastic depth: the rate at which the last block drops a whole residual branch of an
  // image in training, rising from none in the first block (nn/drop_path.h).
  float drop_path = 0.0f;
  // Patch dropout (timm's patch_drop_rate, nn/patch_drop.h): the share of patch tokens each
  // image drops in training, after the position embedding; evaluation keeps them all.
  float patch_drop = 0.0f;
  int num_classes = 10;
  AttentionForm attention = AttentionForm::scaled_dot;
  PosEmbedKind pos_embed = PosEmbedKind::learned;  // sincos2d needs dim % 4 == 0
  PoolKind pool = PoolKind::cls;
  PatchEmbedKind patch_embed = PatchEmbedKind::linear;
  // Channels of the conv stem's first convolution; each later one doubles them.
  int stem_channels = 32;

  int grid() const { return image_size / patch_size; }
  int patches() const { return grid() * grid(); }
  bool has_cls_token() const { return pool == PoolKind::cls; }
  int prefix_tokens() const { return has_cls_token() ? 1 : 0; }  // before the patches
  int tokens() const { return patches() + prefix_tokens(); }  // a CLS token first
  // Patches a training image keeps (nn/patch_drop.h: timm's max(1, int(N (1 - rate)))), and
  // the tokens the blocks then see in training: fewer than tokens() with patch dropout.
  int kept_patches() const {
    if (patch_drop <= 0.0f) return patches();
    const int kept = int(double(patches()) * (1.0 - double(patch_drop)));
    return kept > 1 ? kept : 1;
  }
  int train_tokens() const { return kept_patches() + prefix_tokens(); }
  bool drops_patches(bool training) const { return training && patch_drop > 0.0f; }
  int pass_tokens(bool training) const {
    return drops_patches(training) ? train_tokens() : tokens();
  }
  int head_dim() const { return dim / heads; }
  // The conv stem's stride-2 convolutions: log2 patch_size of them (patch_size a power of
  // two), none without a stem. Stage s maps stem_in(s) channels at stem_side(s - 1) pixels
  // a side to stem_out(s) channels at stem_side(s) = image_size / 2^(s + 1).
  int stem_stages() const {
    if (patch_embed != PatchEmbedKind::conv) return 0;
    int stages = 0;
    while ((2 << stages) <= patch_size) ++stages;
    return stages;
  }
  int stem_out(int s) const { return stem_channels << s; }
  int stem_in(int s) const { return s == 0 ? channels : stem_out(s - 1); }
  int stem_side(int s) const { return image_size >> (s + 1); }
  // Channels the patch embedding's projection sees: the image's; with shifted patches four
  // shifted copies of them after; with a conv stem its last convolution's.
  int patch_channels() const {
    if (patch_embed == PatchEmbedKind::conv) return stem_out(stem_stages() - 1);
    return channels * (patch_embed == PatchEmbedKind::shifted ? 5 : 1);
  }
  // The projection's kernel side: a patch, or after a conv stem one position of its grid.
  int patch_kernel() const { return patch_embed == PatchEmbedKind::conv ? 1 : patch_size; }
  int patch_len() const { return patch_channels() * patch_kernel() * patch_kernel(); }
};

struct DataConfig {
  DataFormat format = DataFormat::idx;
  std::string path = "/usr/share/datasets/fashion-mnist";
  std::vector<float> mean = {0.2860f};  // one per channel
  std::vector<float> std = {0.3530f};
  bool shuffle = true;
  bool augment = true;
  float val_fraction = 0.1f;             // carved from the end of the training split
  std::vector<std::string> class_names;  // empty: from the dataset
  Cifar100Label label = Cifar100Label::fine;  // cifar100 only
  bool resize = true;                    // folder: resize every image to model.image_size

  // Augmentation of the training split (applied only when `augment` is true; each is off
  // at zero). Drawn from (train.seed, step, image), so runs repeat exactly.
  int crop_padding = 0;       // random crop of the image padded by this many zero pixels
  float hflip = 0.0f;         // probability of a horizontal flip
  AutoAugment auto_augment = AutoAugment::none;  // after the crop and flip
  float erasing = 0.0f;       // probability of random erasing (a rectangle of noise)
  float mixup = 0.0f;         // mixup Beta(alpha, alpha) strength
  float cutmix = 0.0f;        // cutmix Beta(alpha, alpha) strength
  float mix_prob = 1.0f;      // probability that a batch is mixed (when mixup/cutmix > 0)

  bool augments() const {
    return augment && (crop_padding > 0 || hflip > 0 || auto_augment != AutoAugment::none ||
                       erasing > 0 || mixup > 0 || cutmix > 0);
  }
};

struct OptimConfig {
  OptimizerKind name = OptimizerKind::adamw;
  float lr = 1e-3f;
  float weight_decay = 0.05f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float momentum = 0.9f;
  LrSchedule schedule = LrSchedule::cosine;
  int64_t warmup_steps = 0;
  float min_lr = 0.0f;
  float clip_grad_norm = 0.0f;  // 0 = off
  float label_smoothing = 0.0f;
  // Decay of an exponential moving average of the weights (timm's model EMA), kept beside
  // them and saved as ema.safetensors; 0 = off.
  float ema_decay = 0.0f;
};

// Most threads train.threads and the commands' --threads accept.
constexpr int kMaxThreads = 1024;

struct TrainConfig {
  int epochs = 10;
  int64_t max_steps = 0;  // 0 = from epochs
  int batch_size = 128;
  uint64_t seed = 0;
  int threads = 0;  // 0 = all cores
  std::string out_dir = "runs/default";
  int log_every = 50;   // steps between metrics.jsonl lines
  int eval_every = 1;   // epochs between validation passes
  // The last epochs train on every patch, model.patch_drop off (FLIP's unmasked tuning):
  // the run ends on the token count evaluation sees. 0 = patch dropout to the end.
  int unmasked_epochs = 0;
  Precision precision = Precision::fp32;  // of the blocks' products in training steps
};

struct Config {
  ModelConfig model;
  DataConfig data;
  OptimConfig optim;
  TrainConfig train;
  std::string source;  // the file it was read from, for messages
};

}  // namespace minivit
