/* Classifies image files with a minivit checkpoint through the C API and prints each image's
 * three most likely classes. The images must be the model's size (28 x 28 for the
 * Fashion-MNIST configs); stb_image reads PNG, JPEG, BMP and friends.
 * usage: c_predict CHECKPOINT IMAGE... */
#include <stdio.h>
#include <stdlib.h>

#include <minivit.h>
#include <stb/stb_image.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s CHECKPOINT IMAGE...\n", argv[0]);
    return 2;
  }
  minivit_model* model = minivit_create();
  minivit_description d;
  if (minivit_load_file(model, argv[1]) != MINIVIT_OK || minivit_describe(model, &d) != MINIVIT_OK) {
    fprintf(stderr, "c_predict: %s\n", minivit_last_error(model));
    return 1;
  }
  float* probs = malloc(sizeof(float) * (size_t)d.classes);
  for (int i = 2; i < argc; ++i) {
    int width, height, channels_in_file;
    unsigned char* pixels = stbi_load(argv[i], &width, &height, &channels_in_file, d.channels);
    if (!pixels || width != d.image_size || height != d.image_size) {
      fprintf(stderr, "c_predict: %s: not a readable %dx%d image\n", argv[i], d.image_size, d.image_size);
      return 1;
    }
    if (minivit_predict_pixels(model, pixels, 1, probs) != MINIVIT_OK) {
      fprintf(stderr, "c_predict: %s: %s\n", argv[i], minivit_last_error(model));
      return 1;
    }
    stbi_image_free(pixels);
    printf("%s\n", argv[i]);
    for (int rank = 0; rank < 3 && rank < d.classes; ++rank) {
      int best = -1;  /* the most likely class not printed yet */
      for (int k = 0; k < d.classes; ++k)
        if (probs[k] >= 0.0f && (best < 0 || probs[k] > probs[best])) best = k;
      const char* name;
      minivit_class_name(model, best, &name);
      printf("  %.4f  %s\n", probs[best], name);
      probs[best] = -1.0f;
    }
  }
  free(probs);
  minivit_free(model);
  return 0;
}
