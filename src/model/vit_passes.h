#pragma once
// What vit.cpp (forward) and vit_backward.cpp share: the cut of a batch into chunks and the
// small passes between layers. Internal to src/model.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "minivit/kernels/threads.h"
#include "minivit/model/activations.h"
#include "minivit/nn/drop_path.h"
#include "minivit/nn/dropout.h"
#include "minivit/kernels/isa.h"

namespace minivit {
MINIVIT_ISA_BEGIN
namespace vit_passes {

// Images per chunk: forward and backward take the batch through the model in chunks, each
// through a whole block on one thread, its (400, 3D) qkv and (400, M) hidden rows staying
// in L2 between the layers that write and read them, and one parallel region serves a
// whole pass (forward) or block (backward) instead of one per layer: each cost a barrier,
// and about 10% of a step's samples were libgomp's waits. The cut is fixed, never the
// thread count's, so the rounding is the same on any number of threads.
constexpr int kChunkImages = 8;

// Calls chunk(b0, n) for the chunks of a batch of B: across the pool, on as many threads as
// there are chunks at most (and at most `slots`, the attention core's scratch), or, for a
// single chunk, on the calling thread, its layers then splitting their rows (an evaluation
// forward splits such a chunk itself, in one region: vit_forward.cpp). Fewer chunks
// than threads still run a chunk per thread: splitting each chunk's rows over 16 threads
// instead made the evaluation of 64 images at a time 14x slower than on 8 threads, slower
// than on one (a region per layer, each with a few rows a thread). The chunks go to whichever
// thread is free: during `train` the loader's thread takes turns on one of the cores, and a
// fixed half each left the other core waiting at the region's end (libgomp's share of a
// CIFAR-10 step's samples 7.2% against 6.2% so). Where there are more chunks than threads,
// the last `threads` chunks go in halves, so that a thread left without work at the
// region's end waits for at most half a chunk. Each image's work is its own, whatever
// chunk it goes in, so the bits depend neither on the cut nor on which thread runs it.
template <class Chunk>
void for_each_chunk(int B, int slots, Chunk&& chunk) {
  const int chunks = (B + kChunkImages - 1) / kChunkImages;
  const int threads = std::min({num_threads(), slots, chunks});
  // The chunks that go whole; the rest go in halves.
  const int whole = threads > 1 && chunks > threads ? chunks - threads : chunks;
  const int tasks = whole + 2 * (chunks - whole);
  auto run = [&](int i) {
    constexpr int kHalf = kChunkImages / 2;
    const int b0 = i < whole ? i * kChunkImages : whole * kChunkImages + (i - whole) * kHalf;
    const int n = std::min(i < whole ? kChunkImages : kHalf, B - b0);
    if (n > 0) chunk(b0, n);
  };
  if (threads > 1) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int i = 0; i < tasks; ++i) run(i);
  } else {
    for (int i = 0; i < tasks; ++i) run(i);
  }
}

// Where image b0 starts in a (B, ...) buffer of per_image elements an image; null stays null
// (a buffer the model's form or mode does without).
template <class T>
T* at_image(T* buffer, int b0, int64_t per_image) {
  return buffer ? buffer + b0 * per_image : buffer;
}

// The shapes of a chunk of images [b0, b0 + n) in a block's pass, forward or backward; at()
// addresses a buffer at image b0. With patch dropout the blocks see fewer tokens in
// training than the embedding makes.
struct ChunkShape {
  int b0, n;
  int T, D, M, H, BT;
  int64_t TD, TM, HTT;

  ChunkShape(const ModelConfig& c, int b0, int n, bool training)
      : b0(b0), n(n), T(c.pass_tokens(training)), D(c.dim), M(c.mlp_dim), H(c.heads),
        BT(n * T), TD(int64_t(T) * D), TM(int64_t(T) * M), HTT(int64_t(H) * T * T) {}

  template <class V>
  V* at(V* buffer, int64_t per_image) const {
    return at_image(buffer, b0, per_image);
  }
};

// Clears a gradient buffer that backward then adds into: megabytes per layer, so both
// cores share the pass (one core's memset left the other waiting for about 5% of a step).
inline void zero(float* p, int64_t n) {
  constexpr int64_t kChunk = 1 << 16;  // floats per piece: 256 KB
  for_ranges(n, n > kChunk, [&](int64_t begin, int64_t end) {
    std::memset(p + begin, 0, size_t(end - begin) * sizeof(float));
  });
}

// The gradient at a dropout's input from the one at its output: `dout` itself when p == 0
// (dropout is then the identity), else `scratch`, filled with dout * mask / (1 - p).
inline const float* through_dropout(float* scratch, const float* dout, const uint8_t* mask,
                                    int64_t n, float p) {
  if (p == 0.0f) return dout;
  dropout_backward(scratch, dout, mask, n, p, false);
  return scratch;
}

// The gradient at a residual branch's output before its dropout (rate p, masks `mask`) and
// drop path (rate p_path, factors path_scale per image), from the one at the residual sum:
// `dout` itself when neither is on, else `scratch`. For n images of per_image floats.
inline const float* through_branch_drops(float* scratch, const float* dout, const uint8_t* mask,
                                         float p, const float* path_scale, float p_path, int n,
                                         int64_t per_image) {
  if (p_path == 0.0f) return through_dropout(scratch, dout, mask, n * per_image, p);
  if (p == 0.0f) {
    drop_path_backward(scratch, dout, path_scale, n, per_image, false);
    return scratch;
  }
  dropout_backward(scratch, dout, mask, n * per_image, p, false);
  scale_images(scratch, path_scale, n, per_image);
  return scratch;
}

// Whether a branch's weight gradients read their output gradient from the scratch that
// through_branch_drops filled, rather than from the residual stream's.
inline bool branch_grad_in_scratch(float p, float p_path) { return p > 0.0f || p_path > 0.0f; }

// Adds the time of a scope to a profile's attention_seconds, when there is a profile: the
// first thread's time where the batch runs in chunks on several (about its share of the
// chunks), an estimate of the share.
struct AttentionTimer {
  StepProfile* profile;
  std::chrono::steady_clock::time_point start;
  explicit AttentionTimer(StepProfile* p) : profile(omp_get_thread_num() == 0 ? p : nullptr) {
    if (profile) start = std::chrono::steady_clock::now();
  }
  ~AttentionTimer() {
    if (profile)
      profile->attention_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

// Whether activations built for `built` hold every buffer a model of config `c` uses.
inline bool built_for(const ModelConfig& built, const ModelConfig& c) {
  return built.image_size == c.image_size && built.channels == c.channels &&
         built.patch_size == c.patch_size && built.dim == c.dim && built.depth == c.depth &&
         built.heads == c.heads && built.mlp_dim == c.mlp_dim &&
         built.num_classes == c.num_classes && built.attention == c.attention &&
         built.pool == c.pool && built.patch_embed == c.patch_embed &&
         (c.patch_embed != PatchEmbedKind::conv || built.stem_channels == c.stem_channels) &&
         (built.dropout > 0.0f) == (c.dropout > 0.0f) &&
         (built.attention_dropout > 0.0f) == (c.attention_dropout > 0.0f) &&
         (built.drop_path > 0.0f) == (c.drop_path > 0.0f) &&
         // Built for patch dropout they serve a pass without it (train.unmasked_epochs), or
         // one that keeps no more patches (the kept patches' own buffers).
         (c.patch_drop <= 0.0f ||
          (built.patch_drop > 0.0f && built.kept_patches() >= c.kept_patches()));
}

}  // namespace vit_passes
MINIVIT_ISA_END
}  // namespace minivit
