// The C API (include/minivit.h) over the checkpoint reader, the model's forward pass and the
// attention inspection: every entry catches what the C++ below throws and turns it into a
// status and the handle's message.
#include "minivit.h"

#include "minivit/api/handle.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "minivit/core/error.h"
#include "minivit/data/dataset.h"
#include "minivit/data/image_io.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/formats/config_file.h"
#include "minivit/formats/safetensors.h"
#include "minivit/inspect/attention_maps.h"
#include "minivit/inspect/grad_rollout.h"
#include "minivit/kernels/compute.h"
#include "minivit/kernels/threads.h"
#include "minivit/model/predict.h"
#include "minivit/train/evaluate.h"

struct minivit_model {
  std::unique_ptr<minivit::Checkpoint> checkpoint;
  std::vector<std::string> class_names;  // (classes), "class_<k>" where the file has none
  std::string pool, attention, patch_embed;  // the description's strings
  std::unique_ptr<minivit::Activations> acts;  // evaluation scratch, grown to the largest batch
  int threads = 0;
  std::string last_error;
};

namespace {

using minivit::Error;

// An error of the caller's: a status of its own.
struct ArgumentError : Error {
  using Error::Error;
};
struct StateError : Error {
  using Error::Error;
};
struct LoadError : Error {
  using Error::Error;
};

// Runs `body`, returning MINIVIT_OK, or the status and message of what it threw. The calls
// that only read (`reading`) leave the message alone when they succeed, so that they may run
// at once on one handle.
template <class Body>
minivit_status guarded(minivit_model* model, Body&& body, bool reading = false) {
  if (!model) return MINIVIT_ERROR_ARGUMENT;
  try {
    body();
    if (!reading) model->last_error.clear();
    return MINIVIT_OK;
  } catch (const ArgumentError& e) {
    model->last_error = e.what();
    return MINIVIT_ERROR_ARGUMENT;
  } catch (const StateError& e) {
    model->last_error = e.what();
    return MINIVIT_ERROR_STATE;
  } catch (const LoadError& e) {
    model->last_error = e.what();
    return MINIVIT_ERROR_LOAD;
  } catch (const std::bad_alloc&) {
    model->last_error = "out of memory";
    return MINIVIT_ERROR_INTERNAL;
  } catch (const std::exception& e) {
    model->last_error = e.what();
    return MINIVIT_ERROR_INTERNAL;
  } catch (...) {
    model->last_error = "an unknown error";
    return MINIVIT_ERROR_INTERNAL;
  }
}

void require(bool holds, const std::string& message) {
  if (!holds) throw ArgumentError(message);
}

const minivit::Checkpoint& loaded(const minivit_model& model) {
  if (!model.checkpoint) throw StateError("no checkpoint loaded (minivit_load_file or minivit_load_memory)");
  return *model.checkpoint;
}

// Replaces the handle's model with `checkpoint`, reading what the description hands out.
void adopt(minivit_model& model, minivit::Checkpoint checkpoint) {
  const minivit::ModelConfig& m = checkpoint.config.model;
  model.class_names = minivit::class_names_for(checkpoint.class_names, m.num_classes);
  model.pool = std::string(minivit::config_name(m.pool));
  model.attention = std::string(minivit::config_name(m.attention));
  model.patch_embed = std::string(minivit::config_name(m.patch_embed));
  model.acts.reset();
  model.checkpoint = std::make_unique<minivit::Checkpoint>(std::move(checkpoint));
}

// Loading's own errors (a missing file, a corrupt one) are the caller's input, not ours.
template <class Load>
void load_into(minivit_model& model, Load&& load) {
  minivit::Checkpoint checkpoint;
  try {
    checkpoint = load();
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw LoadError(e.what());
  }
  adopt(model, std::move(checkpoint));
}

int64_t image_floats(const minivit::ModelConfig& m) {
  return int64_t(m.channels) * m.image_size * m.image_size;
}

void check_finite(const float* values, int64_t n, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i]))
      throw ArgumentError(std::string(what) + ": value " + std::to_string(i) + " is not finite");
}

// The handle's evaluation scratch, for passes of up to `batch` images (grown when smaller),
// with the loaded weights' forward forms and the handle's thread count.
minivit::Activations& evaluation_scratch(minivit_model& model, int batch) {
  const minivit::Checkpoint& ckpt = loaded(model);
  if (!model.acts || model.acts->max_batch < batch) {
    model.acts.reset();  // the old scratch goes before the new is allocated
    model.acts = std::make_unique<minivit::Activations>(ckpt.config.model, batch,
                                                        minivit::ActivationsFor::evaluation);
  }
  model.acts->compute.threads = model.threads;
  // A loaded checkpoint's weights never change: its forward weights are made once.
  if (model.acts->forward_weights_held != ckpt.model->weights.data())
    minivit::hold_forward_weights(*ckpt.model, *model.acts);
  return *model.acts;
}

int handle_threads(const minivit_model& model) {
  return model.threads > 0 ? model.threads : omp_get_max_threads();
}

// Probabilities of `count` normalised images, in chunks through the handle's scratch.
void predict_normalised(minivit_model& model, const float* images, int count, float* probs) {
  const minivit::Checkpoint& ckpt = loaded(model);
  const minivit::ModelConfig& m = ckpt.config.model;
  minivit::Activations& acts = evaluation_scratch(model, minivit::eval_batch_size(count));
  const minivit::DenormalsFlushed flushed(handle_threads(model));
  const int K = m.num_classes;
  const int chunk = acts.max_batch;
  for (int start = 0; start < count; start += chunk) {
    const int B = std::min(chunk, count - start);
    minivit::vit_forward(*ckpt.model, acts, images + int64_t(start) * image_floats(m), B, false,
                         0);
    for (int b = 0; b < B; ++b) {
      const std::vector<double> p =
          minivit::class_probabilities(acts.logits + int64_t(b) * K, K);
      std::copy(p.begin(), p.end(), probs + (int64_t(start) + b) * K);
    }
  }
}

}  // namespace

namespace minivit {

const Config& loaded_config(const minivit_model* model) {
  if (!model) throw Error("the model handle is NULL");
  return loaded(*model).config;
}

}  // namespace minivit

extern "C" {

const char* minivit_version(void) { return MINIVIT_VERSION; }

minivit_model* minivit_create(void) { return new (std::nothrow) minivit_model(); }

void minivit_free(minivit_model* model) { delete model; }

const char* minivit_last_error(const minivit_model* model) {
  return model ? model->last_error.c_str() : "minivit: the model handle is NULL";
}

minivit_status minivit_load_file(minivit_model* model, const char* path) {
  return guarded(model, [&] {
    require(path != nullptr, "minivit_load_file: path is NULL");
    load_into(*model, [&] { return minivit::load_checkpoint(path); });
  });
}

minivit_status minivit_load_memory(minivit_model* model, const void* data, size_t size) {
  return guarded(model, [&] {
    require(data != nullptr || size == 0, "minivit_load_memory: data is NULL");
    load_into(*model, [&] {
      const std::string name = "checkpoint in memory";
      std::string bytes(static_cast<const char*>(data), size);
      return minivit::checkpoint_from_safetensors(minivit::parse_safetensors(bytes, name), name);
    });
  });
}

minivit_status minivit_describe(const minivit_model* model, minivit_description* out) {
  auto* handle = const_cast<minivit_model*>(model);  // only its message changes
  return guarded(handle, [&] {
    require(out != nullptr, "minivit_describe: out is NULL");
    const minivit::Config& config = loaded(*model).config;
    const minivit::ModelConfig& m = config.model;
    out->image_size = m.image_size;
    out->channels = m.channels;
    out->classes = m.num_classes;
    out->patch_size = m.patch_size;
    out->grid = m.grid();
    out->tokens = m.tokens();
    out->layers = m.depth;
    out->heads = m.heads;
    out->dim = m.dim;
    out->pool = model->pool.c_str();
    out->attention = model->attention.c_str();
    out->patch_embed = model->patch_embed.c_str();
    out->mean = config.data.mean.data();
    out->std = config.data.std.data();
  }, true);
}

minivit_status minivit_class_name(const minivit_model* model, int index, const char** name) {
  auto* handle = const_cast<minivit_model*>(model);
  return guarded(handle, [&] {
    require(name != nullptr, "minivit_class_name: name is NULL");
    const int K = loaded(*model).config.model.num_classes;
    require(index >= 0 && index < K, "minivit_class_name: class " + std::to_string(index) +
                                         " is outside 0.." + std::to_string(K - 1));
    *name = model->class_names[size_t(index)].c_str();
  }, true);
}

minivit_status minivit_set_threads(minivit_model* model, int threads) {
  return guarded(model, [&] {
    require(threads >= 0, "minivit_set_threads: " + std::to_string(threads) +
                              " threads; expected 0 (every core) or more");
    model->threads = threads;
  });
}

minivit_status minivit_predict(minivit_model* model, const float* images, int count,
                               float* probs) {
  return guarded(model, [&] {
    require(images != nullptr && probs != nullptr, "minivit_predict: images or probs is NULL");
    require(count >= 1, "minivit_predict: count " + std::to_string(count) + "; expected 1 or more");
    check_finite(images, count * image_floats(loaded(*model).config.model), "minivit_predict");
    predict_normalised(*model, images, count, probs);
  });
}

minivit_status minivit_predict_pixels(minivit_model* model, const uint8_t* pixels, int count,
                                      float* probs) {
  return guarded(model, [&] {
    require(pixels != nullptr && probs != nullptr,
            "minivit_predict_pixels: pixels or probs is NULL");
    require(count >= 1,
            "minivit_predict_pixels: count " + std::to_string(count) + "; expected 1 or more");
    const minivit::Config& config = loaded(*model).config;
    const minivit::ModelConfig& m = config.model;
    const size_t C = size_t(m.channels), S = size_t(m.image_size), plane = S * S;
    std::vector<float> images;
    images.reserve(size_t(count) * C * plane);
    minivit::Image8 chw = minivit::Image8::from_shape({C, S, S});
    for (int b = 0; b < count; ++b) {
      const uint8_t* hwc = pixels + size_t(b) * plane * C;
      for (size_t i = 0; i < plane; ++i)
        for (size_t c = 0; c < C; ++c) chw.data()[c * plane + i] = hwc[i * C + c];
      const std::vector<float> x = minivit::normalise_image(chw, config.data.mean, config.data.std);
      images.insert(images.end(), x.begin(), x.end());
    }
    predict_normalised(*model, images.data(), count, probs);
  });
}

minivit_status minivit_attention(minivit_model* model, const float* image, float* attention,
                                 float* rollout) {
  return guarded(model, [&] {
    require(image != nullptr, "minivit_attention: image is NULL");
    const minivit::Checkpoint& ckpt = loaded(*model);
    check_finite(image, image_floats(ckpt.config.model), "minivit_attention");
    minivit::ThreadsScope threads(model->threads);
    const minivit::DenormalsFlushed flushed(minivit::num_threads());
    const minivit::AttentionMaps maps = minivit::collect_attention(*ckpt.model, image);
    if (attention) std::copy(maps.att.begin(), maps.att.end(), attention);
    if (rollout) {
      const minivit::Tensor2 r =
          minivit::attention_rollout(maps.att, maps.readout(), minivit::Fusion::mean, 0.0);
      std::copy(r.begin(), r.end(), rollout);
    }
  });
}

minivit_status minivit_gradient_rollout(minivit_model* model, const float* image,
                                        int class_index, float* rollout, int* explained) {
  return guarded(model, [&] {
    require(image != nullptr && rollout != nullptr,
            "minivit_gradient_rollout: image or rollout is NULL");
    const minivit::Checkpoint& ckpt = loaded(*model);
    const int K = ckpt.config.model.num_classes;
    require(class_index >= -1 && class_index < K,
            "minivit_gradient_rollout: class " + std::to_string(class_index) +
                "; expected -1 (the predicted class) or 0.." + std::to_string(K - 1));
    check_finite(image, image_floats(ckpt.config.model), "minivit_gradient_rollout");
    minivit::ThreadsScope threads(model->threads);
    const minivit::DenormalsFlushed flushed(minivit::num_threads());
    const minivit::Explanation e = minivit::explain_class(*ckpt.model, image, class_index);
    std::copy(e.grad_rollout.begin(), e.grad_rollout.end(), rollout);
    if (explained) *explained = e.class_index;
  });
}

minivit_status minivit_pool_weights(minivit_model* model, const float* image, float* weights) {
  return guarded(model, [&] {
    require(image != nullptr && weights != nullptr,
            "minivit_pool_weights: image or weights is NULL");
    const minivit::Checkpoint& ckpt = loaded(*model);
    const minivit::ModelConfig& m = ckpt.config.model;
    check_finite(image, image_floats(m), "minivit_pool_weights");
    const int T = m.tokens();
    // A CLS token or the plain mean reads the same tokens of every image: no pass needed.
    if (m.pool == minivit::PoolKind::cls) {
      std::fill(weights, weights + T, 0.0f);
      weights[0] = 1.0f;
      return;
    }
    if (m.pool == minivit::PoolKind::mean) return std::fill(weights, weights + T, 1.0f / float(T));
    // One evaluation forward of the image leaves its weights in the pooling's buffer.
    minivit::Activations& acts = evaluation_scratch(*model, 1);
    const minivit::DenormalsFlushed flushed(handle_threads(*model));
    minivit::vit_forward(*ckpt.model, acts, image, 1, false, 0);
    std::copy(acts.pool_weights, acts.pool_weights + T, weights);
  });
}

}  // extern "C"
