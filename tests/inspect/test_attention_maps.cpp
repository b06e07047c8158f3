// Attention inspection: the maps are the model's own softmax weights, rollout follows
// Abnar & Zuidema (rows renormalised, A_L ... A_1, discard never on the CLS column), a
// model set by hand to look at one patch shows it in the npy, the rollout and the picture,
// and image files reach the model through training's preprocessing.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include <stb/stb_image.h>        // implementations are compiled into the minivit libraries
#include <stb/stb_image_write.h>

#include "minivit/core/error.h"
#include "minivit/data/data.h"
#include "minivit/data/idx.h"
#include "minivit/data/image_io.h"
#include "minivit/formats/npy.h"
#include "minivit/inspect/attention_maps.h"
#include "minivit/model/vit.h"
#include "small_model.h"
#include "test_util.h"

using namespace minivit;
using namespace minivit_test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

ModelConfig small_config() { return small_attention_config(PoolKind::cls); }

std::vector<float> random_image(const ModelConfig& c, uint64_t seed) {
  std::vector<float> x(size_t(c.channels) * c.image_size * c.image_size);
  uint64_t s = seed * 2654435761u + 1;
  for (float& v : x) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = float((s >> 40) % 2001) / 1000.0f - 1.0f;
  }
  return x;
}

Image8 random_image8(int C, int S, uint64_t seed) {
  Image8 img = Image8::from_shape({size_t(C), size_t(S), size_t(S)});
  uint64_t s = seed + 7;
  for (size_t i = 0; i < img.size(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    img.data()[i] = uint8_t(s >> 56);
  }
  return img;
}

template <class E>
std::vector<size_t> shape_of(const E& e) {
  return std::vector<size_t>(e.shape().begin(), e.shape().end());
}

float max_row_sum_error(const Tensor4& att) {
  const size_t T = att.shape(3), rows = att.size() / T;
  float worst = 0.f;
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (size_t j = 0; j < T; ++j) sum += att.data()[r * T + j];
    worst = std::max(worst, float(std::abs(sum - 1.0)));
  }
  return worst;
}

// Rollout written out the long way, as a second opinion on attention_maps.cpp.
std::vector<double> naive_rollout(const std::vector<std::vector<double>>& layers_heads, int L, int H, int T,
                                  const std::string& fusion, double discard) {
  std::vector<double> joint(size_t(T * T), 0.0);
  for (int i = 0; i < T; ++i) joint[size_t(i * T + i)] = 1.0;
  for (int l = 0; l < L; ++l) {
    std::vector<double> a(size_t(T * T));
    for (int i = 0; i < T * T; ++i) {
      double v = layers_heads[size_t(l * H)][size_t(i)];
      for (int h = 1; h < H; ++h) {
        const double x = layers_heads[size_t(l * H + h)][size_t(i)];
        v = fusion == "mean" ? v + x : fusion == "max" ? std::max(v, x) : std::min(v, x);
      }
      a[size_t(i)] = fusion == "mean" ? v / H : v;
    }
    std::vector<std::pair<double, int>> cand;
    for (int i = 0; i < T; ++i)
      for (int j = 1; j < T; ++j) cand.push_back({float(a[size_t(i * T + j)]), i * T + j});
    std::sort(cand.begin(), cand.end());
    const size_t k = size_t(std::floor(discard * double(cand.size())));
    for (size_t i = 0; i < k; ++i) a[size_t(cand[i].second)] = 0.0;
    for (int i = 0; i < T; ++i) {
      a[size_t(i * T + i)] += 1.0;
      double s = 0.0;
      for (int j = 0; j < T; ++j) s += a[size_t(i * T + j)];
      for (int j = 0; j < T; ++j) a[size_t(i * T + j)] /= s;
    }
    std::vector<double> next(size_t(T * T), 0.0);
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j)
        for (int k2 = 0; k2 < T; ++k2) next[size_t(i * T + j)] += a[size_t(i * T + k2)] * joint[size_t(k2 * T + j)];
    joint = next;
  }
  return joint;
}

// Random row-stochastic maps (L, H, T, T) with distinct entries.
Tensor4 random_maps(int L, int H, int T, uint64_t seed) {
  Tensor4 att = Tensor4::from_shape({size_t(L), size_t(H), size_t(T), size_t(T)});
  uint64_t s = seed;
  for (size_t r = 0; r < att.size() / size_t(T); ++r) {
    double sum = 0.0;
    for (int j = 0; j < T; ++j) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      sum += att.data()[r * T + size_t(j)] = float(double(s >> 11) / double(1ull << 53)) + 0.01f;
    }
    for (int j = 0; j < T; ++j) att.data()[r * T + size_t(j)] = float(att.data()[r * T + size_t(j)] / sum);
  }
  return att;
}

// Mean luminance of the middle half of grid cell (row, col) of a tile at (x, y, side).
double cell_luma(const Canvas& c, int x, int y, int side, int G, int row, int col) {
  const int x0 = x + col * side / G, x1 = x + (col + 1) * side / G;
  const int y0 = y + row * side / G, y1 = y + (row + 1) * side / G;
  double sum = 0.0;
  int n = 0;
  for (int py = y0 + (y1 - y0) / 4; py < y1 - (y1 - y0) / 4; ++py)
    for (int px = x0 + (x1 - x0) / 4; px < x1 - (x1 - x0) / 4; ++px, ++n) {
      const Color p = c.get(px, py);
      sum += 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
    }
  return sum / n;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Rollout

TEST_CASE("rollout multiplies row-renormalised (A + I) from the first layer up", "[attention][rollout]") {
  // Two layers, one head, two tokens, by hand:
  //   A1 = rownorm([[.2,.8],[.6,.4]] + I) = [[.6,.4],[.3,.7]]
  //   A2 = rownorm([[1,0],[.5,.5]] + I)   = [[1,0],[.25,.75]]
  //   A2 A1 = [[.6,.4],[.375,.625]]   (A1 A2 would be [[.7,.3],[.475,.525]])
  Tensor4 att = Tensor4::from_shape({2, 1, 2, 2});
  const float values[] = {.2f, .8f, .6f, .4f, 1.f, 0.f, .5f, .5f};
  std::copy(std::begin(values), std::end(values), att.data());
  const Tensor2 r = rollout_matrix(att, PoolKind::cls, Fusion::mean, 0.0);
  CHECK(r(0, 0) == Approx(0.6));
  CHECK(r(0, 1) == Approx(0.4));
  CHECK(r(1, 0) == Approx(0.375));
  CHECK(r(1, 1) == Approx(0.625));
}

TEST_CASE("rollout matches the definition for every fusion and discard ratio", "[attention][rollout]") {
  const int L = 3, H = 4, T = 10;
  const Tensor4 att = random_maps(L, H, T, 5);
  std::vector<std::vector<double>> lh;
  for (int i = 0; i < L * H; ++i)
    lh.emplace_back(att.data() + size_t(i) * T * T, att.data() + size_t(i + 1) * T * T);
  for (const std::string fusion : {"mean", "max", "min"})
    for (const double discard : {0.0, 0.3, 0.9, 1.0}) {
      INFO(fusion << " discard " << discard);
      const Tensor2 r = rollout_matrix(att, PoolKind::cls, parse_fusion(fusion, "test"), discard);
      const std::vector<double> want = naive_rollout(lh, L, H, T, fusion, discard);
      for (int i = 0; i < T * T; ++i) REQUIRE(r.data()[i] == Approx(want[size_t(i)]).margin(1e-6));
      // A product of row-stochastic matrices is row-stochastic.
      for (int i = 0; i < T; ++i) {
        double s = 0.0;
        for (int j = 0; j < T; ++j) s += r(size_t(i), size_t(j));
        CHECK(s == Approx(1.0).margin(1e-6));
      }
      const Tensor2 grid = attention_rollout(att, PoolKind::cls, parse_fusion(fusion, "test"), discard);
      REQUIRE(grid.shape(0) == 3);
      for (int p = 0; p < 9; ++p) CHECK(grid.data()[p] == Approx(want[size_t(1 + p)]).margin(1e-6));
    }
}

TEST_CASE("discard zeroes the smallest entries but never the CLS column", "[attention][rollout]") {
  const size_t T = 4;
  Tensor2 a = Tensor2::from_shape({T, T});
  // Column 0 holds the smallest values of all; the rest are 1..12 in a scrambled order.
  const float rest[] = {7, 3, 11, 1, 9, 5, 12, 2, 8, 4, 10, 6};
  for (size_t i = 0, n = 0; i < T; ++i) {
    a(i, 0) = 0.001f * float(i + 1);
    for (size_t j = 1; j < T; ++j) a(i, j) = rest[n++];
  }
  Tensor2 d = a;
  discard_lowest(d, PoolKind::cls, 0.5);  // floor(0.5 * 4 * 3) = 6 of the 12 entries outside column 0
  for (size_t i = 0; i < T; ++i) {
    CHECK(d(i, 0) == a(i, 0));
    for (size_t j = 1; j < T; ++j) CHECK(d(i, j) == (a(i, j) <= 6 ? 0.f : a(i, j)));
  }
  Tensor2 none = a;
  discard_lowest(none, PoolKind::cls, 0.0);
  CHECK((none == a));
  Tensor2 all = a;
  discard_lowest(all, PoolKind::cls, 1.0);
  for (size_t i = 0; i < T; ++i) {
    CHECK(all(i, 0) == a(i, 0));
    for (size_t j = 1; j < T; ++j) CHECK(all(i, j) == 0.f);
  }
}

TEST_CASE("fusion takes the mean, max or min over heads", "[attention][rollout]") {
  Tensor3 heads = Tensor3::from_shape({3, 1, 2});
  const float v[] = {0.1f, 0.9f, 0.5f, 0.5f, 0.3f, 0.7f};
  std::copy(std::begin(v), std::end(v), heads.data());
  const Tensor2 mean = fuse_heads(heads, Fusion::mean), max = fuse_heads(heads, Fusion::max),
                min = fuse_heads(heads, Fusion::min);
  CHECK(mean(0, 0) == Approx(0.3f));
  CHECK(mean(0, 1) == Approx(0.7f));
  CHECK(max(0, 0) == 0.5f);
  CHECK(max(0, 1) == 0.9f);
  CHECK(min(0, 0) == 0.1f);
  CHECK(min(0, 1) == 0.5f);
  CHECK_THROWS_WITH(parse_fusion("median", "--fusion"), Contains("--fusion") && Contains("median"));
}

TEST_CASE("patch statistics: entropy and top patches with grid coordinates", "[attention]") {
  const float uniform[] = {.25f, .25f, .25f, .25f};
  CHECK(patch_entropy(uniform, 4) == Approx(std::log(4.0)));
  const float peaked[] = {0.f, 0.f, 0.3f, 0.f};  // renormalised: all on one patch
  CHECK(patch_entropy(peaked, 4) == Approx(0.0).margin(1e-12));
  const float w[] = {.1f, .5f, .05f, .2f, .15f, 0.f, 0.f, 0.f, 0.f};
  const auto top = top_patches(w, 3, 2);
  REQUIRE(top.size() == 2);
  CHECK(top[0].patch == 1);
  CHECK(top[0].row == 0);
  CHECK(top[0].col == 1);
  CHECK(top[0].weight == .5f);
  CHECK(top[1].patch == 3);
  CHECK(top[1].row == 1);
  CHECK(top[1].col == 0);
}

// ---------------------------------------------------------------------------------------
// Maps from the model

TEST_CASE("attention maps are the model's softmax weights, rows summing to 1", "[attention]") {
  const ModelConfig c = small_config();
  ViT model(c);
  model.init(11);
  // Larger q/k weights than timm's init, so the attention is far from uniform.
  for (auto& b : model.w.blocks)
    for (int i = 0; i < 2 * c.dim * c.dim; ++i) b.qkv_w[i] *= 20.f;
  const std::vector<float> x = random_image(c, 3);
  const AttentionMaps m = collect_attention(model, x.data());
  const int L = c.depth, H = c.heads, T = c.tokens(), D = c.dim, Dh = c.head_dim(), P = c.patch_size,
            G = c.grid();
  REQUIRE(shape_of(m.att) == std::vector<size_t>{size_t(L), size_t(H), size_t(T), size_t(T)});
  CHECK(max_row_sum_error(m.att) < 1e-5f);
  CHECK(*std::max_element(m.att.begin(), m.att.end()) > 2.f / T);
  double psum = 0.0;
  for (double p : m.probs) psum += p;
  CHECK(psum == Approx(1.0));

  // Layer 0 written out by hand: patches in (channel, row, column) order, CLS first,
  // LayerNorm (eps 1e-6), q and k heads from the fused qkv, softmax(q k^T / sqrt(Dh)).
  auto tok = std::vector<std::vector<double>>(size_t(T), std::vector<double>(size_t(D)));
  for (int d = 0; d < D; ++d) tok[0][size_t(d)] = model.w.cls_token[d] + model.w.pos_embed[d];
  for (int n = 0; n < G * G; ++n)
    for (int d = 0; d < D; ++d) {
      double s = model.w.patch_b[d];
      for (int ch = 0; ch < c.channels; ++ch)
        for (int py = 0; py < P; ++py)
          for (int px = 0; px < P; ++px) {
            const int row = (n / G) * P + py, col = (n % G) * P + px;
            s += double(model.w.patch_w[((d * c.channels + ch) * P + py) * P + px]) *
                 x[size_t((ch * c.image_size + row) * c.image_size + col)];
          }
      tok[size_t(n + 1)][size_t(d)] = s + model.w.pos_embed[(n + 1) * D + d];
    }
  const BlockParams& b = model.w.blocks[0];
  auto qkv = std::vector<std::vector<double>>(size_t(T), std::vector<double>(size_t(3 * D)));
  for (int t = 0; t < T; ++t) {
    double mean = 0.0, var = 0.0;
    for (double v : tok[size_t(t)]) mean += v / D;
    for (double v : tok[size_t(t)]) var += (v - mean) * (v - mean) / D;
    std::vector<double> ln(static_cast<size_t>(D));
    for (int d = 0; d < D; ++d)
      ln[size_t(d)] = (tok[size_t(t)][size_t(d)] - mean) / std::sqrt(var + 1e-6) * b.norm1_w[d] + b.norm1_b[d];
    for (int o = 0; o < 3 * D; ++o) {
      double s = b.qkv_b[o];
      for (int d = 0; d < D; ++d) s += double(b.qkv_w[o * D + d]) * ln[size_t(d)];
      qkv[size_t(t)][size_t(o)] = s;
    }
  }
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < T; ++i) {
      std::vector<double> z(static_cast<size_t>(T));
      double top = -1e300, sum = 0.0;
      for (int j = 0; j < T; ++j) {
        double s = 0.0;
        for (int e = 0; e < Dh; ++e) s += qkv[size_t(i)][size_t(h * Dh + e)] * qkv[size_t(j)][size_t(D + h * Dh + e)];
        z[size_t(j)] = s / std::sqrt(double(Dh));
        top = std::max(top, z[size_t(j)]);
      }
      for (double& v : z) sum += v = std::exp(v - top);
      for (int j = 0; j < T; ++j)
        REQUIRE(m.att(0, size_t(h), size_t(i), size_t(j)) == Approx(z[size_t(j)] / sum).margin(1e-5));
    }
}

TEST_CASE("zero query and key weights attend uniformly, and so does the rollout", "[attention]") {
  const ModelConfig c = small_config();
  ViT model(c);
  model.init(4);
  for (auto& b : model.w.blocks) {
    std::fill(b.qkv_w, b.qkv_w + 2 * c.dim * c.dim, 0.f);  // q and k rows; v untouched
    std::fill(b.qkv_b, b.qkv_b + 2 * c.dim, 0.f);
  }
  const std::vector<float> x = random_image(c, 9);
  const AttentionMaps m = collect_attention(model, x.data());
  for (float v : m.att) REQUIRE(v == Approx(1.0 / c.tokens()).epsilon(1e-6));
  for (const Fusion f : {Fusion::mean, Fusion::max, Fusion::min}) {
    const Tensor2 r = attention_rollout(m.att, m.pool, f, 0.0);
    const auto [lo, hi] = std::minmax_element(r.begin(), r.end());
    CHECK(*hi - *lo < 1e-6f);
    CHECK(*lo > 0.f);
  }
  // A flat map is drawn flat: no tile of grid.png picks out a patch.
  const Image8 img = random_image8(1, c.image_size, 2);
  const Canvas grid = render_grid(img, m.att, m.pool, "uniform");
  const GridLayout g = grid_layout(c.depth, c.heads, c.grid(), c.image_size, m.pool, "uniform");
  CHECK(grid.width == g.width);
  CHECK(grid.height == g.height);
}

TEST_CASE("a model set by hand to look at one patch: the npy, the rollout and the picture agree",
          "[attention]") {
  const ModelConfig c = small_config();
  const int D = c.dim, Dh = c.head_dim(), G = c.grid(), T = c.tokens();
  for (const int chosen : {0, 4, 7}) {
    INFO("chosen patch " << chosen);
    ViT model(c);
    model.init(1);
    // Every token's embedding is zero except the chosen patch's position embedding, a
    // +-1 pattern that LayerNorm keeps as it is; zero tokens normalise to zero. Each head's
    // first key unit reads that pattern (so only the chosen patch has a key) and every query
    // is the constant bias 1 on that unit: all rows look at the chosen patch. The blocks
    // add nothing to the residual stream, so every layer sees the same and does the same.
    auto zero = [](float* p, int64_t n) { std::fill(p, p + n, 0.f); };
    zero(model.w.patch_w, int64_t(D) * c.patch_len());
    zero(model.w.patch_b, D);
    zero(model.w.cls_token, D);
    zero(model.w.pos_embed, int64_t(T) * D);
    for (int d = 0; d < D; ++d) model.w.pos_embed[(chosen + 1) * D + d] = d % 2 ? -1.f : 1.f;
    for (auto& b : model.w.blocks) {
      zero(b.qkv_w, 3 * int64_t(D) * D);
      zero(b.qkv_b, 3 * D);
      for (int h = 0; h < c.heads; ++h) {
        b.qkv_b[h * Dh] = 1.f;                                            // query unit 0
        for (int d = 0; d < D; ++d) b.qkv_w[(D + h * Dh) * D + d] = 5.f * (d % 2 ? -1.f : 1.f);  // key unit 0
      }
      zero(b.proj_w, int64_t(D) * D), zero(b.proj_b, D);
      zero(b.fc2_w, int64_t(D) * c.mlp_dim), zero(b.fc2_b, D);
    }
    const std::vector<float> x = random_image(c, 1);
    const AttentionMaps m = collect_attention(model, x.data());
    CHECK(max_row_sum_error(m.att) < 1e-5f);
    for (size_t row = 0; row < m.att.size() / size_t(T); ++row) {
      const float* r = m.att.data() + row * size_t(T);
      REQUIRE(std::max_element(r, r + T) - r == chosen + 1);
      REQUIRE(r[chosen + 1] > 0.99f);
    }
    // Through the .npy file as a user gets it.
    TempDir tmp("hand");
    const std::vector<int64_t> shape(m.att.shape().begin(), m.att.shape().end());
    write_npy(tmp.str("attention.npy"), m.att.data(), shape);
    const NpyArray back = read_npy(tmp.str("attention.npy"));
    CHECK(back.shape == shape);
    const float* cls = back.values.data();  // layer 0, head 0, CLS row
    CHECK(std::max_element(cls + 1, cls + T) - (cls + 1) == chosen);

    for (const Fusion f : {Fusion::mean, Fusion::max, Fusion::min}) {
      const Tensor2 r = attention_rollout(m.att, m.pool, f, 0.0);
      CHECK(std::max_element(r.begin(), r.end()) - r.begin() == chosen);
      CHECK(r.data()[chosen] == Approx(0.75).margin(1e-3));  // (A + I)/2 twice: 1/2 + 1/4
    }
    const Tensor2 r = attention_rollout(m.att, m.pool, Fusion::mean, 0.5);
    CHECK(std::max_element(r.begin(), r.end()) - r.begin() == chosen);

    // In grid.png every tile is brightest on the chosen patch.
    const Image8 img = random_image8(1, c.image_size, 3);
    const Canvas grid = render_grid(img, m.att, m.pool, "hand-set");
    const GridLayout g = grid_layout(c.depth, c.heads, G, c.image_size, m.pool, "hand-set");
    for (int l = 0; l < c.depth; ++l)
      for (int h = 0; h < c.heads; ++h) {
        int best = -1;
        double best_luma = -1.0;
        for (int p = 0; p < G * G; ++p) {
          const double luma = cell_luma(grid, g.tile_x(h), g.tile_y(l), g.tile, G, p / G, p % G);
          if (luma > best_luma) best_luma = luma, best = p;
        }
        CHECK(best == chosen);
      }
  }
}

TEST_CASE("pictures: input upscaled by a whole factor, colour images in colour", "[attention][image]") {
  Image8 rgb = Image8::from_shape({3, 32, 32});
  for (size_t i = 0; i < 32 * 32; ++i) rgb.data()[i] = 200, rgb.data()[1024 + i] = 20, rgb.data()[2048 + i] = 90;
  const Canvas c = render_input(rgb);
  CHECK(c.width == 224);  // 32 x 7
  CHECK(c.height == 224);
  CHECK(c.get(100, 100) == Color{200, 20, 90});
  const Image8 grey = random_image8(1, 28, 5);
  const Canvas g = render_input(grey, 224);
  CHECK(g.width == 224);
  CHECK(g.get(8 * 3 + 4, 8 * 2 + 4) == Color{grey(0, 2, 3), grey(0, 2, 3), grey(0, 2, 3)});
  const Canvas big = render_input(random_image8(1, 300, 1));
  CHECK(big.width == 300);
}

// ---------------------------------------------------------------------------------------
// Files

TEST_CASE("image files become the model's channels and size", "[attention][image]") {
  TempDir tmp("image_io");
  // Grey 12x12, the model's size: used pixel for pixel.
  std::vector<uint8_t> grey(144);
  for (size_t i = 0; i < grey.size(); ++i) grey[i] = uint8_t(i * 7 % 256);
  REQUIRE(stbi_write_png(tmp.str("grey.png").c_str(), 12, 12, 1, grey.data(), 12));
  LoadedImage a = load_image_file(tmp.str("grey.png"), 1, 12);
  CHECK(shape_of(a.pixels) == std::vector<size_t>{1, 12, 12});
  CHECK(std::equal(grey.begin(), grey.end(), a.pixels.begin()));
  CHECK(a.file_channels == 1);

  // Grey to an RGB model: three equal planes.
  LoadedImage rgb = load_image_file(tmp.str("grey.png"), 3, 12);
  CHECK(shape_of(rgb.pixels) == std::vector<size_t>{3, 12, 12});
  for (size_t i = 0; i < 144; ++i) {
    CHECK(rgb.pixels.data()[i] == grey[i]);
    CHECK(rgb.pixels.data()[144 + i] == grey[i]);
    CHECK(rgb.pixels.data()[288 + i] == grey[i]);
  }

  // RGB to a grey model: stb's luma; non-square and another size: resized to 12x12.
  std::vector<uint8_t> colour(20 * 10 * 3);
  for (size_t i = 0; i < 200; ++i) colour[i * 3] = 200, colour[i * 3 + 1] = 100, colour[i * 3 + 2] = 50;
  REQUIRE(stbi_write_png(tmp.str("wide.png").c_str(), 20, 10, 3, colour.data(), 60));
  LoadedImage w = load_image_file(tmp.str("wide.png"), 1, 12);
  CHECK(shape_of(w.pixels) == std::vector<size_t>{1, 12, 12});
  CHECK(w.file_width == 20);
  CHECK(w.file_height == 10);
  const int luma = (200 * 77 + 100 * 150 + 50 * 29) >> 8;
  for (uint8_t p : w.pixels) CHECK(std::abs(int(p) - luma) <= 1);

  // Normalisation as training does it.
  const std::vector<float> x = normalise_image(a.pixels, {0.3f}, {0.25f});
  for (size_t i = 0; i < 144; ++i) CHECK(x[i] == Approx((grey[i] / 255.0 - 0.3) / 0.25).margin(1e-5));
  const Image8 back = denormalise_image(x.data(), 1, 12, {0.3f}, {0.25f});
  CHECK((back == a.pixels));

  CHECK_THROWS_WITH(load_image_file(tmp.str("none.png"), 1, 12), Contains("none.png") && Contains("no such"));
  write_text(tmp.str("notes.png"), "not an image at all");
  CHECK_THROWS_WITH(load_image_file(tmp.str("notes.png"), 1, 12),
                    Contains("notes.png") && Contains("cannot read as an image"));
  CHECK_THROWS_AS(load_image_file(tmp.str(), 1, 12), Error);
}

// ---------------------------------------------------------------------------------------
// The commands
