/* Prediction through the C API, timed as `minivit bench` times the program's own passes:
 * batch-1 latency on one thread (median over IMAGES forwards after 100 untimed, cycling through
 * 64 different images) and batch-128 throughput on the machine's threads (STEPS batches after
 * 5 untimed). Synthetic normalised images.
 * usage: api_bench CHECKPOINT [IMAGES] [STEPS] */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>

#include <minivit.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compare(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static void check(minivit_model* model, minivit_status status) {
  if (status == MINIVIT_OK) return;
  fprintf(stderr, "api_bench: %s\n", minivit_last_error(model));
  exit(1);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CHECKPOINT [IMAGES] [STEPS]\n", argv[0]);
    return 2;
  }
  const int images = argc > 2 ? atoi(argv[2]) : 1000, steps = argc > 3 ? atoi(argv[3]) : 50;
  minivit_model* model = minivit_create();
  minivit_description d;
  check(model, minivit_load_file(model, argv[1]));
  check(model, minivit_describe(model, &d));
  const size_t len = (size_t)d.channels * d.image_size * d.image_size;
  float* x = malloc(sizeof(float) * len * 128);
  float* probs = malloc(sizeof(float) * (size_t)d.classes * 128);
  for (size_t i = 0; i < len * 128; ++i) x[i] = (float)sin(0.731 * (double)i);

  check(model, minivit_set_threads(model, 1));
  double* ms = malloc(sizeof(double) * (size_t)images);
  for (int i = 0; i < 100 + images; ++i) {
    const double t0 = now();
    check(model, minivit_predict(model, x + (size_t)(i % 64) * len, 1, probs));
    if (i >= 100) ms[i - 100] = 1e3 * (now() - t0);
  }
  qsort(ms, (size_t)images, sizeof(double), compare);
  const double median = images % 2 ? ms[images / 2] : 0.5 * (ms[images / 2 - 1] + ms[images / 2]);

  check(model, minivit_set_threads(model, 0));
  for (int i = 0; i < 5; ++i) check(model, minivit_predict(model, x, 128, probs));
  const double t0 = now();
  for (int i = 0; i < steps; ++i) check(model, minivit_predict(model, x, 128, probs));
  const double rate = 128.0 * steps / (now() - t0);
  printf("api latency  batch 1, 1 thread: median %.3f ms over %d images\n", median, images);
  printf("api eval     %8.1f img/s at batch 128 over %d batches\n", rate, steps);
  free(ms);
  free(probs);
  free(x);
  minivit_free(model);
  return 0;
}
