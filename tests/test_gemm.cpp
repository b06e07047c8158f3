// The gemm wrapper against a naive triple loop: every transpose combination, leading
// dimensions larger than the matrix, beta = 0 and 1, and sizes large enough to be split
// across threads.
#include <catch2/catch.hpp>

#include "gradcheck.h"
#include "minivit/gemm.h"

using namespace minivit;

static void check_gemm(bool ta, bool tb, int M, int N, int K, float beta, int pad) {
  const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  auto A = minivit_test::random_vector(int64_t(ta ? K : M) * lda, 1.0f, 1);
  auto B = minivit_test::random_vector(int64_t(tb ? N : K) * ldb, 1.0f, 2);
  auto C = minivit_test::random_vector(int64_t(M) * ldc, 1.0f, 3);
  std::vector<float> C0 = C;
  gemm(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  for (int i = 0; i < M; i += std::max(1, M / 17))
    for (int j = 0; j < N; j += std::max(1, N / 13)) {
      double ref = 0;
      for (int k = 0; k < K; ++k)
        ref += double(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
      ref = 0.5 * ref + beta * C0[i * ldc + j];
      INFO("ta " << ta << " tb " << tb << " M " << M << " N " << N << " K " << K << " at " << i << "," << j);
      REQUIRE(C[i * ldc + j] == Approx(ref).margin(1e-4 * std::sqrt(double(K))));
    }
  // Padding columns of C are never touched.
  if (pad)
    for (int i = 0; i < M; ++i) REQUIRE(C[i * ldc + N] == C0[i * ldc + N]);
}

TEST_CASE("gemm matches a naive product for all transposes", "[gemm]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        check_gemm(ta, tb, 7, 5, 3, beta, 0);
        check_gemm(ta, tb, 50, 16, 50, beta, 3);
        check_gemm(ta, tb, 1300, 96, 64, beta, 0);   // split by rows
        check_gemm(ta, tb, 64, 1300, 96, beta, 2);   // split by columns
        check_gemm(ta, tb, 96, 64, 3000, beta, 1);   // long reduction
      }
}

TEST_CASE("gemm results do not depend on the thread count", "[gemm]") {
  const int M = 640, N = 192, K = 64;
  auto A = minivit_test::random_vector(M * K, 1.0f, 4), B = minivit_test::random_vector(N * K, 1.0f, 5);
  std::vector<float> C1(M * N), C2(M * N);
  const int threads = num_threads();
  set_num_threads(1);
  gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C1.data(), N);
  set_num_threads(2);
  gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C2.data(), N);
  set_num_threads(threads);
  CHECK(C1 == C2);  // a row split leaves every dot product's order unchanged
}
