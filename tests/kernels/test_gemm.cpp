// The gemm wrapper against an independent product in double precision (xtensor-blas's
// linalg::dot): every transpose combination, leading dimensions larger than the matrix,
// beta = 0 and 1, and sizes large enough to be split across threads; for each set of
// kernels this CPU runs (minivit's AVX2 and AVX-512 ones, with AMX tiles for bf16 products
// where the CPU has them, and OpenBLAS), each at its level (kernels/isa.h), through the same
// gemm() the program's code compiled once calls.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xtensor.hpp>

#include "gradcheck.h"
#include "minivit/kernels/gemm.h"
#include "minivit/kernels/runtime.h"
#include "minivit/kernels/compute.h"
#include "minivit/kernels/threads.h"

using namespace minivit;

// op(X) (rows, cols) in double, from a row-major buffer with leading dimension ld; each
// element rounded to bf16 first when `bf16`.
static xt::xtensor<double, 2> op_matrix(const std::vector<float>& X, bool trans, int rows,
                                        int cols, int ld, bool bf16 = false) {
  xt::xtensor<double, 2> m = xt::empty<double>({size_t(rows), size_t(cols)});
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      const float x = trans ? X[size_t(j) * ld + i] : X[size_t(i) * ld + j];
      m(i, j) = bf16 ? minivit_test::round_to_bf16(x) : x;
    }
  return m;
}

// Checks every element of the product. With beta = 0 C starts as NaN, so a kernel that
// reads the C it was told to ignore fails.
// With Precision::bf16 the product is checked against the one of the inputs rounded to
// bf16 where the kernels in use compute it so, else against the exact one.
static void check_gemm(const Compute& compute, bool ta, bool tb, int M, int N, int K, float beta,
                       int pad, float alpha = 0.5f, Precision precision = Precision::fp32) {
  const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  auto A = minivit_test::random_vector(int64_t(ta ? K : M) * lda, 1.0f, 1);
  auto B = minivit_test::random_vector(int64_t(tb ? N : K) * ldb, 1.0f, 2);
  auto C = minivit_test::random_vector(int64_t(M) * ldc, 1.0f, 3);
  if (beta == 0.0f)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) C[size_t(i) * ldc + j] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> C0 = C;
  gemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc,
       {compute.kernels, precision});
  const bool bf16 = precision == Precision::bf16 && compute.bf16_products();
  const xt::xtensor<double, 2> product =
      xt::linalg::dot(op_matrix(A, ta, M, K, lda, bf16), op_matrix(B, tb, K, N, ldb, bf16));
  const double tolerance = 1e-4 * std::sqrt(double(K) + 1);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const double ref =
          alpha * product(i, j) + (beta == 0.0f ? 0.0 : beta * C0[size_t(i) * ldc + j]);
      const float got = C[size_t(i) * ldc + j];
      if (std::abs(got - ref) <= tolerance) continue;  // NaN falls through
      INFO(compute.kernels_name() << (bf16 ? " bf16" : "") << ": ta " << ta << " tb " << tb << " M " << M << " N " << N
                               << " K " << K << " beta " << beta << " at " << i << "," << j);
      REQUIRE(got == Approx(ref).margin(tolerance));
    }
  // Padding columns of C are never touched.
  if (pad)
    for (int i = 0; i < M; ++i) REQUIRE(C[size_t(i) * ldc + N] == C0[size_t(i) * ldc + N]);
}

// Runs the body once for each set of kernels this CPU runs, handing it their Compute.
template <typename Body>
static void for_each_gemm_kernels(Body body) {
  for (GemmKernels kernels :
       {GemmKernels::openblas, GemmKernels::avx2, GemmKernels::avx512, GemmKernels::amx})
    if (const auto compute = Compute::with_kernels(kernels)) body(*compute);
}

TEST_CASE("gemm matches a naive product for all transposes", "[gemm]") {
  for_each_gemm_kernels([](const Compute& compute) {
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.0f, 1.0f}) {
          check_gemm(compute, ta, tb, 7, 5, 3, beta, 0);
          check_gemm(compute, ta, tb, 50, 16, 50, beta, 3);
          check_gemm(compute, ta, tb, 1300, 96, 64, beta, 0);  // split by rows
          check_gemm(compute, ta, tb, 64, 1300, 96, beta, 2);  // split by columns
          check_gemm(compute, ta, tb, 96, 64, 3000, beta, 1);  // long reduction
        }
  });
}

TEST_CASE("gemm handles every edge of minivit's kernels' tiles", "[gemm]") {
  // Rows around the 6-row tile, the 12-row one of products of at most 32 columns, and the
  // 96-row block, columns around the 8-wide vectors of the AVX2 kernels' 16-column tile and
  // the 16-wide ones of the AVX-512 kernels' 32- and 64-column tiles, reductions around the
  // 128-long packed block; then a beta other than 0 and 1 with a negative alpha, and a bias
  // gradient's 1^T . dY.
  for_each_gemm_kernels([](const Compute& compute) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        for (int M : {1, 5, 6, 7, 12, 13, 25, 49, 97})
          for (int N : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65})
            for (int K : {1, 127, 128, 129}) check_gemm(compute, ta, tb, M, N, K, 0.0f, 1);
        check_gemm(compute, ta, tb, 19, 150, 300, 0.25f, 2, -1.5f);
        // More columns than the kernels pack at a time (4 panels of 64, 16 of 16), with a
        // ragged last group and several reduction blocks.
        check_gemm(compute, ta, tb, 100, 300, 150, 0.5f, 1, 2.0f);
        check_gemm(compute, ta, tb, 1, 192, 6400, 1.0f, 0, 1.0f);
      }
  });
}

// minivit's kernels cut the rows into tiles by how many are left (one row left over goes
// with the tile before it as two halves); each element sums its k in the same order in a
// tile of any height, so a row's values are those it gets alone, bit for bit.
TEST_CASE("gemm gives each row of C the bits it gets alone, whatever tiles the rows fall in",
          "[gemm]") {
  for_each_gemm_kernels([](const Compute& compute) {
    if (compute.kernels == GemmKernels::openblas) return;  // its last rows round otherwise
    for (bool ta : {false, true})
      for (int M : {7, 13, 49}) {
        const int N = 64, K = 96, lda = ta ? M : K;
        const auto A = minivit_test::random_vector(int64_t(M) * K, 1.0f, 4);
        const auto B = minivit_test::random_vector(int64_t(N) * K, 1.0f, 5);
        std::vector<float> whole(size_t(M) * N), alone(size_t(M) * N);
        gemm(ta, true, M, N, K, 1.0f, A.data(), lda, B.data(), K, 0.0f, whole.data(), N,
             {compute.kernels, Precision::fp32});
        std::vector<float> row(K);
        for (int i = 0; i < M; ++i) {
          for (int k = 0; k < K; ++k) row[k] = ta ? A[size_t(k) * lda + i] : A[size_t(i) * K + k];
          gemm(false, true, 1, N, K, 1.0f, row.data(), K, B.data(), K, 0.0f,
               alone.data() + size_t(i) * N, N, {compute.kernels, Precision::fp32});
        }
        INFO("M " << M << (ta ? ", A transposed" : ""));
        for (size_t e = 0; e < whole.size(); ++e) REQUIRE(whole[e] == alone[e]);
      }
  });
}

TEST_CASE("bf16 products match the product of bf16-rounded inputs at every edge", "[gemm]") {
  // Reductions around the bf16 kernels' 256-long block, the AMX tiles' 32 and odd ones (a
  // pair with a zero partner), rows around the 6-row tile, the 16-row AMX tile, the 32-row
  // AMX block and the 96-row block, columns around the vectors and the AMX tiles.
  for_each_gemm_kernels([](const Compute& compute) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        for (int M : {1, 6, 7, 17, 33, 97})
          for (int N : {1, 17, 33, 64, 65})
            for (int K : {1, 2, 3, 31, 33, 255, 256, 257}) check_gemm(compute, ta, tb, M, N, K, 0.0f, 1, 0.5f, Precision::bf16);
        check_gemm(compute, ta, tb, 100, 300, 515, 0.5f, 1, 2.0f, Precision::bf16);
        check_gemm(compute, ta, tb, 1300, 96, 64, 1.0f, 0, 1.0f, Precision::bf16);  // split by rows
        check_gemm(compute, ta, tb, 64, 1300, 96, 0.0f, 2, 1.0f, Precision::bf16);  // split by columns
        check_gemm(compute, ta, tb, 96, 192, 6272, 1.0f, 0, 1.0f, Precision::bf16);  // a weight gradient's
      }
  });
}

TEST_CASE("bf16 products round their inputs, and only where the kernels can", "[gemm]") {
  // 1 + 2^-10 lies between two bf16 (1 and 1 + 2^-7) and rounds to 1: four of its products
  // with 1 sum to exactly 4 in bf16, and to 4 + 2^-8 in fp32.
  const float a[4] = {1.0f + 0x1p-10f, 1.0f + 0x1p-10f, 1.0f + 0x1p-10f, 1.0f + 0x1p-10f};
  const float b[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  for_each_gemm_kernels([&](const Compute& compute) {
    float c = 0.0f;
    gemm(false, false, 1, 1, 4, 1.0f, a, 4, b, 1, 0.0f, &c, 1, {compute.kernels, Precision::bf16});
    CHECK(c == (compute.bf16_products() ? 4.0f : 4.0f + 0x1p-8f));
    gemm(false, false, 1, 1, 4, 1.0f, a, 4, b, 1, 0.0f, &c, 1, {compute.kernels});
    CHECK(c == 4.0f + 0x1p-8f);
  });
  CHECK_FALSE(Compute::with_kernels(GemmKernels::openblas)->bf16_products());  // fp32 only
}

TEST_CASE("gemm with an empty reduction scales C by beta", "[gemm]") {
  for_each_gemm_kernels([](const Compute& compute) {
    std::vector<float> C = {1.0f, 2.0f, 3.0f, 4.0f};
    const float unused[2] = {0.0f, 0.0f};
    gemm(false, false, 2, 2, 0, 1.0f, unused, 1, unused, 2, 0.5f, C.data(), 2, {compute.kernels});
    CHECK(C == std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f});
    std::fill(C.begin(), C.end(), std::numeric_limits<float>::quiet_NaN());
    gemm(false, false, 2, 2, 0, 1.0f, unused, 1, unused, 2, 0.0f, C.data(), 2, {compute.kernels});
    CHECK(C == std::vector<float>(4, 0.0f));
  });
}

TEST_CASE("each set of kernels runs where the CPU has what it needs, at its level", "[gemm]") {
  const auto openblas = Compute::with_kernels(GemmKernels::openblas);
  REQUIRE(openblas);  // everywhere
  CHECK(openblas->kernels_name().rfind("OpenBLAS ", 0) == 0);
  CHECK(openblas->isa == best_isa());
  CHECK(cpu_runs(Isa::x86_64));
  if (const auto avx2 = Compute::with_kernels(GemmKernels::avx2)) {
    CHECK(avx2->kernels_name() == "minivit AVX2");
    CHECK(avx2->isa == Isa::avx2);
    CHECK_FALSE(avx2->bf16_products());  // fp32 only
    CHECK(blas_kernel_advice(*avx2).empty());  // OpenBLAS computes nothing then
  } else {
    CHECK_FALSE(cpu_runs(Isa::avx2));
  }
  if (const auto avx512 = Compute::with_kernels(GemmKernels::avx512)) {
    CHECK(avx512->kernels_name() == "minivit AVX-512");
    CHECK(avx512->isa == Isa::avx512);
    CHECK(avx512->bf16_products() == cpu_has_avx512_bf16());
    CHECK(cpu_runs(Isa::avx2));  // the levels nest
  } else {
    CHECK_FALSE(cpu_runs(Isa::avx512));
  }
  if (const auto amx = Compute::with_kernels(GemmKernels::amx)) {
    CHECK(amx->kernels_name() == "minivit AVX-512 + AMX");
    CHECK(amx->bf16_products());
  }
  // The automatic choice is the first of AMX, AVX-512, AVX2 and OpenBLAS the CPU runs
  // (MINIVIT_GEMM aside, which the test suite leaves unset).
  if (!std::getenv("MINIVIT_GEMM")) {
    const Compute automatic = Compute::automatic();
    for (GemmKernels k : {GemmKernels::amx, GemmKernels::avx512, GemmKernels::avx2})
      if (cpu_runs(k)) {
        CHECK(automatic.kernels == k);
        break;
      }
    CHECK(automatic.isa == best_isa());
  }
}

// The epilogue (a bias, a residual, or both) against the passes it replaces: C seeded with
// the bias before a product with beta = 1, or the residual and then the bias added to the
// product afterwards. Equal bit for bit, over tile edges, several blocks of k and both cuts
// of a product split across threads.
static void check_epilogue(const Compute& compute, Precision precision, int M, int N, int K,
                           bool with_bias, bool with_residual) {
  const int ldc = N + 3, ldr = N + 5;
  auto A = minivit_test::random_vector(int64_t(M) * K, 1.0f, 6);
  auto B = minivit_test::random_vector(int64_t(N) * K, 1.0f, 7);
  auto bias = minivit_test::random_vector(N, 1.0f, 8);
  auto residual = minivit_test::random_vector(int64_t(M) * ldr, 1.0f, 9);
  const Products products{compute.kernels, precision};
  std::vector<float> fused(size_t(M) * ldc, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> passes(size_t(M) * ldc);
  GemmEpilogue epilogue;
  if (with_bias) epilogue.bias = bias.data();
  if (with_residual) epilogue.residual = residual.data(), epilogue.ld_residual = ldr;
  gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, fused.data(), ldc, products,
       epilogue);
  if (with_bias && !with_residual) {
    for (int i = 0; i < M; ++i) std::copy_n(bias.data(), N, passes.data() + size_t(i) * ldc);
    gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 1.0f, passes.data(), ldc,
         products);
  } else {
    gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, passes.data(), ldc,
         products);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        float& c = passes[size_t(i) * ldc + j];
        c = residual[size_t(i) * ldr + j] + c;
        if (with_bias) c = c + bias[size_t(j)];
      }
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      if (!(fused[size_t(i) * ldc + j] == passes[size_t(i) * ldc + j])) {
        INFO(compute.kernels_name() << (precision == Precision::bf16 ? " bf16" : "") << " M "
                                    << M << " N " << N << " K " << K << " bias " << with_bias
                                    << " residual " << with_residual << " at " << i << "," << j);
        REQUIRE(fused[size_t(i) * ldc + j] == passes[size_t(i) * ldc + j]);
      }
  for (int i = 0; i < M; ++i) REQUIRE(std::isnan(fused[size_t(i) * ldc + N]));  // padding
}

TEST_CASE("gemm's epilogue adds a bias and a residual as separate passes would, bit for bit",
          "[gemm]") {
  for_each_gemm_kernels([](const Compute& compute) {
    for (Precision precision : {Precision::fp32, Precision::bf16})
      for (auto [bias, residual] : {std::pair{true, false}, {false, true}, {true, true}}) {
        check_epilogue(compute, precision, 7, 5, 3, bias, residual);
        check_epilogue(compute, precision, 97, 65, 129, bias, residual);  // edges, 2 blocks of k
        check_epilogue(compute, precision, 19, 150, 300, bias, residual);  // 3 blocks, 2 groups
        check_epilogue(compute, precision, 1300, 96, 64, bias, residual);  // split by rows
        check_epilogue(compute, precision, 64, 1300, 96, bias, residual);  // split by columns
      }
  });
  const auto compute = Compute::automatic();
  std::vector<float> one(1, 1.0f), c(1, 0.0f);
  const GemmEpilogue bias_only{one.data(), nullptr, 0};
  CHECK_THROWS_WITH(gemm(false, false, 1, 1, 1, 1.0f, one.data(), 1, one.data(), 1, 1.0f,
                         c.data(), 1, {compute.kernels}, bias_only),
                    "gemm: an epilogue (bias, residual, GELU or scale) needs beta = 0");
}

// The GELU epilogue: C keeps the product and bias as without it, bit for bit, and the GELU
// matrix holds the exact GELU of C to vecmath.h's precision, for every kernel set (the AMX
// tiles and OpenBLAS through gemm()'s pass after the product) and every cut. With gelu_slope
// the GELU matrix is the same bit for bit and C holds GELU's exact slope at the product.
static void check_gelu_epilogue(const Compute& compute, Precision precision, int M, int N, int K) {
  const int ldc = N + 1, ldg = N + 2;
  auto A = minivit_test::random_vector(int64_t(M) * K, 1.0f, 10);
  auto B = minivit_test::random_vector(int64_t(N) * K, 1.0f, 11);
  auto bias = minivit_test::random_vector(N, 1.0f, 12);
  const Products products{compute.kernels, precision};
  std::vector<float> plain(size_t(M) * ldc), C(size_t(M) * ldc);
  std::vector<float> gelu(size_t(M) * ldg, std::numeric_limits<float>::quiet_NaN());
  gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, plain.data(), ldc, products,
       GemmEpilogue{bias.data(), nullptr, 0});
  GemmEpilogue epilogue{bias.data(), nullptr, 0};
  epilogue.gelu = gelu.data();
  epilogue.ld_gelu = ldg;
  gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), ldc, products,
       epilogue);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const float c = C[size_t(i) * ldc + j];
      const double x = c, exact = 0.5 * x * std::erfc(-x / std::sqrt(2.0));
      const float got = gelu[size_t(i) * ldg + j];
      INFO(compute.kernels_name() << " M " << M << " N " << N << " K " << K << " at " << i
                                  << "," << j);
      REQUIRE(c == plain[size_t(i) * ldc + j]);
      REQUIRE(std::abs(got - exact) <= 4e-6 * std::abs(exact) + 1e-7);
    }
  for (int i = 0; i < M; ++i) REQUIRE(std::isnan(gelu[size_t(i) * ldg + N]));  // padding

  std::vector<float> slope(size_t(M) * ldc), gelu_again(size_t(M) * ldg, 0.0f);
  epilogue.gelu = gelu_again.data();
  epilogue.gelu_slope = true;
  gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, slope.data(), ldc, products,
       epilogue);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const double x = C[size_t(i) * ldc + j];
      const double exact = 0.5 * std::erfc(-x / std::sqrt(2.0)) +
                           x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * 3.14159265358979324);
      INFO(compute.kernels_name() << " M " << M << " N " << N << " K " << K << " at " << i
                                  << "," << j << " slope");
      REQUIRE(gelu_again[size_t(i) * ldg + j] == gelu[size_t(i) * ldg + j]);
      REQUIRE(std::abs(slope[size_t(i) * ldc + j] - exact) <= 4e-6 * std::abs(exact) + 1e-7);
    }
}

// The scale epilogue: C = 0 + C * scale equals the product followed by that pass, bit for bit,
// with both transposes of A (backward's products read A plainly) over ragged tiles and cuts.
static void check_scale_epilogue(const Compute& compute, Precision precision, bool trans_a,
                                 int M, int N, int K) {
  const int ldc = N + 1, lds = N + 3;
  auto A = minivit_test::random_vector(int64_t(M) * K, 1.0f, 13);
  auto B = minivit_test::random_vector(int64_t(N) * K, 1.0f, 14);
  auto scale = minivit_test::random_vector(int64_t(M) * lds, 1.0f, 15);
  const Products products{compute.kernels, precision};
  const int lda = trans_a ? M : K;
  std::vector<float> plain(size_t(M) * ldc), C(size_t(M) * ldc);
  gemm(trans_a, false, M, N, K, 1.0f, A.data(), lda, B.data(), N, 0.0f, plain.data(), ldc,
       products);
  GemmEpilogue epilogue;
  epilogue.scale = scale.data();
  epilogue.ld_scale = lds;
  gemm(trans_a, false, M, N, K, 1.0f, A.data(), lda, B.data(), N, 0.0f, C.data(), ldc, products,
       epilogue);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const float expected = 0.0f + plain[size_t(i) * ldc + j] * scale[size_t(i) * lds + j];
      INFO(compute.kernels_name() << " M " << M << " N " << N << " K " << K << " at " << i
                                  << "," << j);
      REQUIRE(std::memcmp(&C[size_t(i) * ldc + j], &expected, sizeof(float)) == 0);
    }
}

TEST_CASE("gemm's scale epilogue multiplies C as a pass after it would", "[gemm]") {
  for_each_gemm_kernels([](const Compute& compute) {
    for (Precision precision : {Precision::fp32, Precision::bf16})
      for (bool trans_a : {false, true}) {
        check_scale_epilogue(compute, precision, trans_a, 7, 5, 3);
        check_scale_epilogue(compute, precision, trans_a, 97, 100, 300);  // 2 blocks of k
        check_scale_epilogue(compute, precision, trans_a, 1300, 128, 64);  // split by rows
        check_scale_epilogue(compute, precision, trans_a, 64, 1300, 96);   // split by columns
      }
  });
}

TEST_CASE("gemm's GELU epilogue stores GELU(C) beside C", "[gemm]") {
  for_each_gemm_kernels([](const Compute& compute) {
    for (Precision precision : {Precision::fp32, Precision::bf16}) {
      check_gelu_epilogue(compute, precision, 7, 5, 3);
      check_gelu_epilogue(compute, precision, 97, 100, 129);   // ragged tiles, 2 blocks of k
      check_gelu_epilogue(compute, precision, 1300, 128, 64);  // split by rows
      check_gelu_epilogue(compute, precision, 64, 1300, 96);   // split by columns
    }
  });
}

TEST_CASE("gemm skipping the k that k_used marks, whose terms are exact zeros, gives the "
          "product over every k bit for bit", "[gemm]") {
  // A weight gradient's shape, dW (O, I) = dY^T X over R rows, with the rows of dY that
  // k_used marks 0 zero (a dropped patch's), R long enough for several blocks of k and
  // signed zeros among the rest; and a bias gradient's 1^T dY. I = 27: a product of at most
  // 32 columns, which the AVX-512 kernels run in narrower tiles.
  for_each_gemm_kernels([](const Compute& compute) {
    for (auto [O, I] : {std::pair{70, 45}, {70, 27}})
    for (bool tb : {false, true}) {
      const int R = 1100;
      auto dY = minivit_test::random_vector(int64_t(R) * O, 1.0f, 11);
      const auto X = minivit_test::random_vector(int64_t(R) * I, 1.0f, 12);
      std::vector<uint8_t> used(R);
      for (int r = 0; r < R; ++r) {
        used[size_t(r)] = (r * 7) % 5 < 2 || r < 3;
        if (!used[size_t(r)]) std::fill_n(dY.begin() + int64_t(r) * O, O, 0.0f);
        if (r % 11 == 0) dY[size_t(r) * O] = -0.0f;
      }
      std::vector<float> Xt(X.size());  // X^T, for op(B) transposed
      for (int r = 0; r < R; ++r)
        for (int i = 0; i < I; ++i) Xt[size_t(i) * R + r] = X[size_t(r) * I + i];
      const float* B = tb ? Xt.data() : X.data();
      const int ldb = tb ? R : I;
      const Products products{compute.kernels, Precision::fp32};
      auto dW = minivit_test::random_vector(O * I, 1.0f, 13), skipped = dW;
      gemm(true, tb, O, I, R, 1.0f, dY.data(), O, B, ldb, 1.0f, dW.data(), I, products);
      gemm(true, tb, O, I, R, 1.0f, dY.data(), O, B, ldb, 1.0f, skipped.data(), I, products, {},
           used.data());
      INFO(compute.kernels_name() << " tb " << tb << " I " << I);
      CHECK(std::memcmp(dW.data(), skipped.data(), dW.size() * sizeof(float)) == 0);
      const std::vector<float> ones(R, 1.0f);
      std::vector<float> db(O, 0.0f), db_skipped(O, 0.0f);
      gemm(true, false, 1, O, R, 1.0f, ones.data(), 1, dY.data(), O, 1.0f, db.data(), O, products);
      gemm(true, false, 1, O, R, 1.0f, ones.data(), 1, dY.data(), O, 1.0f, db_skipped.data(), O,
           products, {}, used.data());
      CHECK(std::memcmp(db.data(), db_skipped.data(), db.size() * sizeof(float)) == 0);
      // Where skips_unused_k says so (minivit's fp32 kernels), they are not read: a NaN in
      // every entry of a skipped row of X reaches nothing.
      CHECK(skips_unused_k(products) == (compute.kernels == GemmKernels::avx2 ||
                                         compute.kernels == GemmKernels::avx512 ||
                                         compute.kernels == GemmKernels::amx));
      if (!skips_unused_k(products)) continue;
      std::vector<float> X_nan = X, Xt_nan = Xt;
      for (int r = 0; r < R; ++r)
        if (!used[size_t(r)])
          for (int i = 0; i < I; ++i)
            X_nan[size_t(r) * I + i] = Xt_nan[size_t(i) * R + r] =
                std::numeric_limits<float>::quiet_NaN();
      std::vector<float> from_nan = minivit_test::random_vector(O * I, 1.0f, 13);
      gemm(true, tb, O, I, R, 1.0f, dY.data(), O, tb ? Xt_nan.data() : X_nan.data(), ldb, 1.0f,
           from_nan.data(), I, products, {}, used.data());
      CHECK(std::memcmp(dW.data(), from_nan.data(), dW.size() * sizeof(float)) == 0);
    }
  });
}

// a_row_sums: the sums of op(A)'s rows in runs of 128 k, as gemm.h defines them, bit for
// bit, beside a product that stays what it is without them; and for minivit's fp32 kernels
// the same bits as their product by a column of ones, which the sums replace in a weight
// gradient's bias. Shapes of weight gradients dW (O, I) = dY^T X over R rows: several blocks
// of k and an odd R, more rows than the bf16 kernel's 96-row block, more columns than its
// four panels (op(A) packed twice), and splits across the pool by rows and by columns; with
// and without k_used's zero rows.
TEST_CASE("gemm's a_row_sums sum op(A)'s rows as a product by ones would, bit for bit",
          "[gemm]") {
  for_each_gemm_kernels([](const Compute& compute) {
    for (Precision precision : {Precision::fp32, Precision::bf16})
      for (auto [O, I, R] : {std::tuple{70, 45, 1101}, {130, 300, 517}, {1300, 96, 260},
                             {64, 1300, 300}, {5, 3, 7}})
        for (bool skip : {false, true}) {
          auto dY = minivit_test::random_vector(int64_t(R) * O, 1.0f, 14);
          const auto X = minivit_test::random_vector(int64_t(R) * I, 1.0f, 15);
          std::vector<uint8_t> used(size_t(R), 1);
          if (skip)
            for (int r = 0; r < R; ++r)
              if ((r * 7) % 5 >= 2 && r >= 3) {
                used[size_t(r)] = 0;
                std::fill_n(dY.begin() + int64_t(r) * O, O, 0.0f);
              }
          std::vector<float> expected = minivit_test::random_vector(O, 1.0f, 16);
          for (int o = 0; o < O; ++o) {
            float total = expected[size_t(o)];
            for (int k0 = 0; k0 < R; k0 += 128) {
              float run = 0.0f;
              for (int k = k0; k < std::min(R, k0 + 128); ++k)
                if (used[size_t(k)]) run += dY[size_t(k) * O + o];
              total += run;
            }
            expected[size_t(o)] = total;
          }
          const Products products{compute.kernels, precision};
          const uint8_t* k_used = skip ? used.data() : nullptr;
          auto dW = minivit_test::random_vector(O * I, 1.0f, 17), dW_alone = dW;
          std::vector<float> sums = minivit_test::random_vector(O, 1.0f, 16);
          GemmEpilogue with_sums;
          with_sums.a_row_sums = sums.data();
          gemm(true, false, O, I, R, 1.0f, dY.data(), O, X.data(), I, 1.0f, dW.data(), I,
               products, with_sums, k_used);
          gemm(true, false, O, I, R, 1.0f, dY.data(), O, X.data(), I, 1.0f, dW_alone.data(), I,
               products, {}, k_used);
          INFO(compute.kernels_name() << (precision == Precision::bf16 ? " bf16" : "") << " O "
                                      << O << " I " << I << " R " << R << " skip " << skip);
          CHECK(std::memcmp(sums.data(), expected.data(), sums.size() * sizeof(float)) == 0);
          CHECK(std::memcmp(dW.data(), dW_alone.data(), dW.size() * sizeof(float)) == 0);
          if (compute.kernels != GemmKernels::avx2 && compute.kernels != GemmKernels::avx512)
            continue;
          const std::vector<float> ones(size_t(R), 1.0f);
          std::vector<float> by_ones = minivit_test::random_vector(O, 1.0f, 16);
          gemm(true, false, 1, O, R, 1.0f, ones.data(), 1, dY.data(), O, 1.0f, by_ones.data(), O,
               {compute.kernels, Precision::fp32}, {}, k_used);
          CHECK(std::memcmp(sums.data(), by_ones.data(), sums.size() * sizeof(float)) == 0);
        }
  });
  std::vector<float> one(1, 1.0f), c(1, 0.0f), sums(1, 0.0f);
  GemmEpilogue with_sums;
  with_sums.a_row_sums = sums.data();
  CHECK_THROWS_WITH(gemm(false, false, 1, 1, 1, 1.0f, one.data(), 1, one.data(), 1, 0.0f,
                         c.data(), 1, {Compute::automatic().kernels}, with_sums),
                    "gemm: a_row_sums needs A transposed (a weight gradient's dout^T)");
}

TEST_CASE("gemm results do not depend on the thread count", "[gemm]") {
  for_each_gemm_kernels([](const Compute& compute) {
    for (Precision precision : {Precision::fp32, Precision::bf16}) {
      const int M = 640, N = 192, K = 64;
      auto A = minivit_test::random_vector(M * K, 1.0f, 4);
      auto B = minivit_test::random_vector(N * K, 1.0f, 5);
      std::vector<float> C1(M * N), C2(M * N);
      {
        ThreadsScope one(1);
        gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C1.data(), N,
             {compute.kernels, precision});
      }
      {
        ThreadsScope two(2);
        gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C2.data(), N,
             {compute.kernels, precision});
      }
      CHECK(C1 == C2);  // a row split leaves every dot product's order unchanged
    }
  });
}

TEST_CASE("the thread pool flushes denormal floats to zero", "[gemm]") {
  const int threads = num_threads();
  set_num_threads(2);
  int flushed = 0, ran = 0;
#pragma omp parallel num_threads(2) reduction(+ : flushed, ran)
  {
    volatile float tiny = 1e-30f;
    volatile float product = tiny * 1e-10f;  // 1e-40, a denormal unless flushed
    flushed += product == 0.0f;
    ++ran;
  }
  set_num_threads(threads);
  CHECK(flushed == ran);
}
