// The C API (include/minivit.h) against the program's own path through a trained checkpoint:
// the same probabilities as vit_forward, the same attention and rollouts as the inspection
// code; and every kind of bad input answered with a status and a message, never an abort.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "minivit.h"
#include "minivit/data/dataset.h"
#include "minivit/data/image_io.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/inspect/attention_maps.h"
#include "minivit/inspect/grad_rollout.h"
#include "minivit/model/predict.h"
#include "test_util.h"

using namespace minivit_test;

namespace {

// A trained tiny model (8x8 grey images, 4 classes), its checkpoint read once per test case.
struct Trained {
  TinyTrainedRun run{"c_api", 8};
  minivit::Checkpoint ckpt = minivit::load_checkpoint(run.ckpt);
  int image_len() const { return ckpt.config.model.channels * 64; }
  // Normalised images, deterministic and different from each other.
  std::vector<float> images(int count) const {
    std::vector<float> x(size_t(count) * image_len());
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) * 1.5f;
    return x;
  }
};

struct Handle {
  minivit_model* model = minivit_create();
  ~Handle() { minivit_free(model); }
};

}  // namespace

TEST_CASE("the C API predicts what the model's own forward pass gives", "[api]") {
  const Trained t;
  REQUIRE(t.run.train.exit_code == 0);
  Handle h;
  REQUIRE(h.model != nullptr);
  REQUIRE(minivit_load_file(h.model, t.run.ckpt.c_str()) == MINIVIT_OK);
  CHECK(std::string(minivit_last_error(h.model)).empty());

  minivit_description d;
  REQUIRE(minivit_describe(h.model, &d) == MINIVIT_OK);
  const minivit::ModelConfig& m = t.ckpt.config.model;
  CHECK(d.image_size == 8);
  CHECK(d.channels == 1);
  CHECK(d.classes == m.num_classes);
  CHECK(d.grid == m.grid());
  CHECK(d.tokens == m.tokens());
  CHECK(d.layers == m.depth);
  CHECK(d.heads == m.heads);
  CHECK(std::string(d.pool) == "cls");
  CHECK(std::string(d.attention) == "scaled_dot");
  CHECK(d.mean[0] == t.ckpt.config.data.mean[0]);
  const char* name = nullptr;
  REQUIRE(minivit_class_name(h.model, 0, &name) == MINIVIT_OK);
  CHECK(std::string(name) == minivit::class_names_for(t.ckpt.class_names, m.num_classes)[0]);

  const int count = 5, K = m.num_classes;
  const std::vector<float> x = t.images(count);
  std::vector<float> probs(size_t(count) * K, -1.0f);
  REQUIRE(minivit_predict(h.model, x.data(), count, probs.data()) == MINIVIT_OK);
  minivit::Activations acts(m, count, minivit::ActivationsFor::evaluation);
  minivit::vit_forward(*t.ckpt.model, acts, x.data(), count, false, 0);
  for (int b = 0; b < count; ++b) {
    const std::vector<double> expected = minivit::class_probabilities(acts.logits + b * K, K);
    for (int k = 0; k < K; ++k) CHECK(probs[size_t(b * K + k)] == float(expected[size_t(k)]));
  }
  // One thread or two, the same answer.
  std::vector<float> one_thread(probs.size());
  REQUIRE(minivit_set_threads(h.model, 1) == MINIVIT_OK);
  REQUIRE(minivit_predict(h.model, x.data(), count, one_thread.data()) == MINIVIT_OK);
  CHECK(one_thread == probs);
}

TEST_CASE("the C API loads from memory as from the file, and reads pixels as training does",
          "[api]") {
  const Trained t;
  Handle from_file, from_memory;
  REQUIRE(minivit_load_file(from_file.model, t.run.ckpt.c_str()) == MINIVIT_OK);
  const std::string bytes = read_raw(t.run.ckpt);
  REQUIRE(minivit_load_memory(from_memory.model, bytes.data(), bytes.size()) == MINIVIT_OK);
  const int K = t.ckpt.config.model.num_classes;
  // Pixels (1, 8, 8, 1) against the same image normalised by the program's own function.
  std::vector<uint8_t> pixels(64);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t((i * 37) % 256);
  minivit::Image8 chw = minivit::Image8::from_shape({1, 8, 8});
  std::copy(pixels.begin(), pixels.end(), chw.data());
  const std::vector<float> x =
      minivit::normalise_image(chw, t.ckpt.config.data.mean, t.ckpt.config.data.std);
  std::vector<float> a(static_cast<size_t>(K)), b(a), c(a);
  REQUIRE(minivit_predict(from_file.model, x.data(), 1, a.data()) == MINIVIT_OK);
  REQUIRE(minivit_predict(from_memory.model, x.data(), 1, b.data()) == MINIVIT_OK);
  REQUIRE(minivit_predict_pixels(from_memory.model, pixels.data(), 1, c.data()) == MINIVIT_OK);
  CHECK(a == b);
  CHECK(a == c);
}

TEST_CASE("the C API's attention and rollouts are the inspection code's", "[api]") {
  const Trained t;
  Handle h;
  REQUIRE(minivit_load_file(h.model, t.run.ckpt.c_str()) == MINIVIT_OK);
  const minivit::ModelConfig& m = t.ckpt.config.model;
  const std::vector<float> x = t.images(1);
  const size_t L = size_t(m.depth), H = size_t(m.heads), T = size_t(m.tokens()),
               G = size_t(m.grid());
  std::vector<float> att(L * H * T * T), rollout(G * G), grad(G * G);
  REQUIRE(minivit_attention(h.model, x.data(), att.data(), rollout.data()) == MINIVIT_OK);
  const minivit::AttentionMaps maps = minivit::collect_attention(*t.ckpt.model, x.data());
  CHECK(std::vector<float>(maps.att.begin(), maps.att.end()) == att);
  const minivit::Tensor2 r =
      minivit::attention_rollout(maps.att, maps.pool, minivit::Fusion::mean, 0.0);
  CHECK(std::vector<float>(r.begin(), r.end()) == rollout);
  REQUIRE(minivit_attention(h.model, x.data(), nullptr, rollout.data()) == MINIVIT_OK);

  int explained = -5;
  REQUIRE(minivit_gradient_rollout(h.model, x.data(), -1, grad.data(), &explained) == MINIVIT_OK);
  const minivit::Explanation e = minivit::explain_class(*t.ckpt.model, x.data(), -1);
  CHECK(explained == e.class_index);
  CHECK(std::vector<float>(e.grad_rollout.begin(), e.grad_rollout.end()) == grad);
}

TEST_CASE("the C API's pool weights are what the head reads", "[api]") {
  std::vector<float> x(64);  // one normalised 8 x 8 grey image
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) * 1.5f;
  SECTION("a CLS model reads token 0 alone") {
    const Trained t;
    Handle h;
    REQUIRE(minivit_load_file(h.model, t.run.ckpt.c_str()) == MINIVIT_OK);
    std::vector<float> weights(size_t(t.ckpt.config.model.tokens()), -1.0f);
    REQUIRE(minivit_pool_weights(h.model, x.data(), weights.data()) == MINIVIT_OK);
    std::vector<float> want(weights.size(), 0.0f);
    want[0] = 1.0f;
    CHECK(weights == want);
  }
  for (const char* pool : {"mean", "seq"}) {
    DYNAMIC_SECTION("pool = " << pool) {
      TinyTrainedRun run("c_api_pool", 8, std::string("--set model.pool=") + pool);
      REQUIRE(run.train.exit_code == 0);
      const minivit::Checkpoint ckpt = minivit::load_checkpoint(run.ckpt);
      const size_t T = size_t(ckpt.config.model.tokens());
      Handle h;
      REQUIRE(minivit_load_file(h.model, run.ckpt.c_str()) == MINIVIT_OK);
      std::vector<float> weights(T + 1, -1.0f);  // one float past the end stays untouched
      REQUIRE(minivit_pool_weights(h.model, x.data(), weights.data()) == MINIVIT_OK);
      CHECK(weights[T] == -1.0f);
      weights.resize(T);
      if (std::string(pool) == "mean") {
        CHECK(weights == std::vector<float>(T, 1.0f / float(T)));
      } else {
        // The image's own weights, as the inspection code reads them; learned, not uniform.
        const minivit::AttentionMaps maps = minivit::collect_attention(*ckpt.model, x.data());
        CHECK(weights == maps.pool_weights);
        double sum = 0.0;
        for (float w : weights) sum += w;
        CHECK(sum == Approx(1.0).epsilon(1e-5));
        CHECK(*std::max_element(weights.begin(), weights.end()) >
              *std::min_element(weights.begin(), weights.end()));
        // After a prediction of several images has grown the handle's scratch, the same.
        const int count = 3;
        std::vector<float> images, probs(size_t(count * ckpt.config.model.num_classes));
        for (int i = 0; i < count; ++i) images.insert(images.end(), x.begin(), x.end());
        REQUIRE(minivit_predict(h.model, images.data(), count, probs.data()) == MINIVIT_OK);
        std::vector<float> again(T);
        REQUIRE(minivit_pool_weights(h.model, x.data(), again.data()) == MINIVIT_OK);
        CHECK(again == weights);
      }
    }
  }
}

TEST_CASE("the C API answers bad input with a status and a message", "[api]") {
  const Trained t;
  Handle h;
  const int K = t.ckpt.config.model.num_classes;
  std::vector<float> x = t.images(2), probs(size_t(2 * K)), out(64);
  const char* name = nullptr;
  minivit_description d;
  auto message = [&] { return std::string(minivit_last_error(h.model)); };

  // No handle, no model yet.
  CHECK(minivit_load_file(nullptr, t.run.ckpt.c_str()) == MINIVIT_ERROR_ARGUMENT);
  CHECK_THAT(minivit_last_error(nullptr), Catch::Contains("NULL"));
  minivit_free(nullptr);
  CHECK(minivit_predict(h.model, x.data(), 1, probs.data()) == MINIVIT_ERROR_STATE);
  CHECK_THAT(message(), Catch::Contains("no checkpoint loaded"));
  CHECK(minivit_describe(h.model, &d) == MINIVIT_ERROR_STATE);
  CHECK(minivit_pool_weights(h.model, x.data(), out.data()) == MINIVIT_ERROR_STATE);

  // Files and buffers that are not checkpoints; the handle keeps what it held.
  CHECK(minivit_load_file(h.model, nullptr) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_load_file(h.model, "/nonexistent/last.safetensors") == MINIVIT_ERROR_LOAD);
  CHECK_THAT(message(), Catch::Contains("/nonexistent/last.safetensors"));
  const std::string junk = "this is not a checkpoint";
  CHECK(minivit_load_memory(h.model, junk.data(), junk.size()) == MINIVIT_ERROR_LOAD);
  CHECK_THAT(message(), Catch::Contains("checkpoint in memory"));
  CHECK(minivit_load_memory(h.model, nullptr, 10) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_load_memory(h.model, junk.data(), 0) == MINIVIT_ERROR_LOAD);
  std::string bytes = read_raw(t.run.ckpt);
  bytes.resize(bytes.size() - 9);
  CHECK(minivit_load_memory(h.model, bytes.data(), bytes.size()) == MINIVIT_ERROR_LOAD);
  CHECK(minivit_describe(h.model, &d) == MINIVIT_ERROR_STATE);

  REQUIRE(minivit_load_file(h.model, t.run.ckpt.c_str()) == MINIVIT_OK);
  CHECK(minivit_load_file(h.model, "/nonexistent/last.safetensors") == MINIVIT_ERROR_LOAD);
  CHECK(minivit_describe(h.model, &d) == MINIVIT_OK);  // still the model loaded before

  // Arguments.
  CHECK(minivit_describe(h.model, nullptr) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_class_name(h.model, K, &name) == MINIVIT_ERROR_ARGUMENT);
  CHECK_THAT(message(), Catch::Contains("class " + std::to_string(K)));
  CHECK(minivit_class_name(h.model, -1, &name) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_class_name(h.model, 0, nullptr) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_set_threads(h.model, -2) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_predict(h.model, nullptr, 1, probs.data()) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_predict(h.model, x.data(), 1, nullptr) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_predict(h.model, x.data(), 0, probs.data()) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_predict(h.model, x.data(), -3, probs.data()) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_predict_pixels(h.model, nullptr, 1, probs.data()) == MINIVIT_ERROR_ARGUMENT);
  x[70] = std::numeric_limits<float>::quiet_NaN();
  CHECK(minivit_predict(h.model, x.data(), 2, probs.data()) == MINIVIT_ERROR_ARGUMENT);
  CHECK_THAT(message(), Catch::Contains("value 70 is not finite"));
  x[70] = std::numeric_limits<float>::infinity();
  CHECK(minivit_attention(h.model, x.data() + 64, out.data(), nullptr) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_attention(h.model, nullptr, nullptr, nullptr) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_gradient_rollout(h.model, x.data(), K, out.data(), nullptr) ==
        MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_gradient_rollout(h.model, x.data(), -2, out.data(), nullptr) ==
        MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_gradient_rollout(h.model, x.data(), 0, nullptr, nullptr) ==
        MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_pool_weights(h.model, nullptr, out.data()) == MINIVIT_ERROR_ARGUMENT);
  CHECK(minivit_pool_weights(h.model, x.data(), nullptr) == MINIVIT_ERROR_ARGUMENT);
  CHECK_THAT(message(), Catch::Contains("minivit_pool_weights"));
  CHECK(minivit_pool_weights(h.model, x.data() + 64, out.data()) == MINIVIT_ERROR_ARGUMENT);
  CHECK_THAT(message(), Catch::Contains("not finite"));
  // A good call clears the message.
  CHECK(minivit_predict(h.model, x.data(), 1, probs.data()) == MINIVIT_OK);
  CHECK(message().empty());
}

TEST_CASE("C API handles on different threads compute independently", "[api]") {
  const Trained t;
  const int count = 9, K = t.ckpt.config.model.num_classes;
  const std::vector<float> x = t.images(count);
  std::vector<float> alone(size_t(count) * K);
  {
    Handle h;
    REQUIRE(minivit_load_file(h.model, t.run.ckpt.c_str()) == MINIVIT_OK);
    REQUIRE(minivit_predict(h.model, x.data(), count, alone.data()) == MINIVIT_OK);
  }
  std::vector<std::vector<float>> results(3, std::vector<float>(alone.size()));
  std::vector<minivit_status> status(3, MINIVIT_ERROR_INTERNAL);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      Handle h;
      status[size_t(i)] = minivit_load_file(h.model, t.run.ckpt.c_str());
      minivit_set_threads(h.model, 1);
      for (int repeat = 0; repeat < 5 && status[size_t(i)] == MINIVIT_OK; ++repeat)
        status[size_t(i)] = minivit_predict(h.model, x.data(), count, results[size_t(i)].data());
    });
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < 3; ++i) {
    CHECK(status[size_t(i)] == MINIVIT_OK);
    CHECK(results[size_t(i)] == alone);
  }
  CHECK(std::string(minivit_version()) == "0.2.0");
}

TEST_CASE("C API calls that only read run at once on one handle", "[api]") {
  const Trained t;
  Handle h;
  REQUIRE(minivit_load_file(h.model, t.run.ckpt.c_str()) == MINIVIT_OK);
  const int K = t.ckpt.config.model.num_classes;
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int repeat = 0; repeat < 2000; ++repeat) {
        minivit_description d;
        const char* name = nullptr;
        failures[size_t(i)] += minivit_describe(h.model, &d) != MINIVIT_OK || d.classes != K;
        failures[size_t(i)] += minivit_class_name(h.model, repeat % K, &name) != MINIVIT_OK ||
                               name == nullptr;
      }
    });
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == std::vector<int>(4, 0));
}
