/* minivit's C API: load a trained checkpoint, describe it, predict classes and look at its
 * attention from C, C++ or any language with a C foreign-function interface (python/minivit.py
 * is the Python one). docs/api.md has an example of every call.
 *
 *   minivit_model* model = minivit_create();
 *   if (minivit_load_file(model, "runs/fashion_mnist/last.safetensors") != MINIVIT_OK)
 *     fprintf(stderr, "%s\n", minivit_last_error(model));
 *
 * Every call returns a status; after one that is not MINIVIT_OK, minivit_last_error(model)
 * says what went wrong in one line. No call aborts, throws or exits on bad input, and nothing
 * is process-wide: each model handle holds its weights, its scratch, its thread count and its
 * last error. Calls on different handles may run at once on different threads. Calls on one
 * handle must not overlap, except minivit_describe, minivit_class_name and minivit_version,
 * which only read (and, when they succeed, leave the handle's last message as it was); a
 * handle may move between threads between calls.
 *
 * Layouts (row-major, float32 unless said):
 *   images, normalised   (count, channels, size, size), as training normalised them:
 *                        (pixel / 255 - mean[c]) / std[c] with the checkpoint's statistics
 *   pixels               (count, size, size, channels) uint8, the layout image files decode
 *                        to; the API normalises them with the checkpoint's statistics
 *   probabilities        (count, classes), each row summing to 1
 *   attention            (layers, heads, tokens, tokens); row i is where token i looks
 *   rollout              (grid, grid), each patch's weight where the head reads: the CLS
 *                        token's row (its own column left out), the mean of the rows
 *                        (pool = mean), or the rows weighted by the pooling weights (seq)
 *   pool weights         (tokens), each token's share of what the head reads, summing to 1
 *
 * Since 0.2.0: minivit_pool_weights.
 */
#ifndef MINIVIT_H
#define MINIVIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The shared library exports these names and nothing else. */
#if defined(__GNUC__)
#define MINIVIT_API __attribute__((visibility("default")))
#else
#define MINIVIT_API
#endif

#define MINIVIT_VERSION_MAJOR 0
#define MINIVIT_VERSION_MINOR 2
#define MINIVIT_VERSION_PATCH 0

typedef enum minivit_status {
  MINIVIT_OK = 0,
  MINIVIT_ERROR_ARGUMENT = 1, /* a NULL pointer, a size or index out of range, a pixel not finite */
  MINIVIT_ERROR_LOAD = 2,     /* the file or buffer is not a minivit checkpoint that loads */
  MINIVIT_ERROR_STATE = 3,    /* no checkpoint loaded into the handle yet */
  MINIVIT_ERROR_INTERNAL = 4  /* out of memory, or the CPU refused: the message says */
} minivit_status;

typedef struct minivit_model minivit_model;

/* What a loaded model takes and gives. The strings live as long as the handle's checkpoint. */
typedef struct minivit_description {
  int image_size;  /* side of the square images, in pixels */
  int channels;    /* 1 (grey) or 3 (RGB) */
  int classes;
  int patch_size;
  int grid;        /* patches per side: image_size / patch_size */
  int tokens;      /* per image in the blocks: grid * grid, plus 1 with a CLS token */
  int layers;      /* transformer blocks */
  int heads;
  int dim;
  const char* pool;        /* "cls", "mean" or "seq": what the head reads */
  const char* attention;   /* the score form: "scaled_dot", "dot", "additive", "cosine", "lsa" */
  const char* patch_embed; /* "linear", "shifted" or "conv" */
  const float* mean;       /* (channels) the normalisation the model was trained with */
  const float* std;        /* (channels) */
} minivit_description;

/* "0.2.0": the library's version, which may differ from the header's MINIVIT_VERSION_*. */
MINIVIT_API const char* minivit_version(void);

/* A handle without a model; NULL only when memory is exhausted. */
MINIVIT_API minivit_model* minivit_create(void);
/* Frees the handle and everything it holds. NULL is allowed. */
MINIVIT_API void minivit_free(minivit_model* model);

/* The message of the handle's last failed call, "" when none failed; valid until the next
 * call on the handle. A NULL handle gets a message saying so. */
MINIVIT_API const char* minivit_last_error(const minivit_model* model);

/* Loads a checkpoint `train` wrote (last.safetensors, best.safetensors), replacing any model
 * the handle held; on failure the handle keeps what it held. */
MINIVIT_API minivit_status minivit_load_file(minivit_model* model, const char* path);
/* The same from `size` bytes of a checkpoint in memory (copied; the caller keeps them). */
MINIVIT_API minivit_status minivit_load_memory(minivit_model* model, const void* data, size_t size);

MINIVIT_API minivit_status minivit_describe(const minivit_model* model, minivit_description* out);
/* The name of class `index` (0 <= index < classes), "class_<index>" when the checkpoint has
 * none; valid as long as the handle's checkpoint. */
MINIVIT_API minivit_status minivit_class_name(const minivit_model* model, int index, const char** name);

/* Threads the handle's calls compute on: 0 (the default) for every core. */
MINIVIT_API minivit_status minivit_set_threads(minivit_model* model, int threads);

/* Class probabilities of `count` images, normalised, into probs (count, classes). */
MINIVIT_API minivit_status minivit_predict(minivit_model* model, const float* images, int count,
                               float* probs);
/* The same from 8-bit pixels (count, size, size, channels), normalised here. */
MINIVIT_API minivit_status minivit_predict_pixels(minivit_model* model, const uint8_t* pixels, int count,
                                      float* probs);

/* One normalised image (channels, size, size): the softmax attention of every layer and head
 * into `attention` (layers, heads, tokens, tokens), and the attention rollout (Abnar and
 * Zuidema 2020: heads averaged, identity added, layers multiplied, read where the head reads)
 * into `rollout` (grid, grid). Either output may be NULL. */
MINIVIT_API minivit_status minivit_attention(minivit_model* model, const float* image, float* attention,
                                 float* rollout);
/* One normalised image: the class-specific gradient rollout of class `class_index` (-1: the
 * predicted class) into `rollout` (grid, grid); the class explained into *explained when not
 * NULL. */
MINIVIT_API minivit_status minivit_gradient_rollout(minivit_model* model, const float* image,
                                        int class_index, float* rollout, int* explained);
/* One normalised image: each token's share of what the head reads into `weights` (tokens):
 * the learned sequence-pooling weights of this image (pool = "seq"), 1 / tokens each
 * ("mean"), or 1 on the CLS token, token 0, and 0 elsewhere ("cls"). Since 0.2.0. */
MINIVIT_API minivit_status minivit_pool_weights(minivit_model* model, const float* image,
                                    float* weights);

#ifdef __cplusplus
}
#endif

#endif /* MINIVIT_H */
