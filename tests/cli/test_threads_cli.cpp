// Training repeats its weights bit for bit whatever the thread count: the program run on
// one thread, on two and on more threads than the batch has chunks of images.
#include <catch2/catch.hpp>
#include <string>

#include "test_util.h"

using namespace minivit_test;

TEST_CASE("training on one thread, on two and on twelve ends with the same weights", "[cli][threads]") {
  // In both precisions of the blocks' products: the bf16 kernels cut as the fp32 ones do.
  const std::string precision = GENERATE("fp32", "bf16");
  INFO("train.precision " << precision);
  // And through a conv stem, whose first convolution's rows (64 images x 64 positions x 32
  // channels) are cut into pieces too; that run also drops patches, whose draws must not
  // depend on the cut of the batch either.
  const std::string embed = GENERATE("linear", "conv");
  const std::string patch_drop = embed == "conv" ? "0.3" : "0";
  INFO("model.patch_embed " << embed << ", model.patch_drop " << patch_drop);
  TempDir tmp("threads");
  const std::string data = tmp.str("data");
  write_tiny_idx_dataset(data, 320, 32, 16, 4);
  write_text(tmp.str("t.toml"), tiny_config_toml(data, tmp.str("unused"), 16, 4));
  // Large enough that products and LayerNorm's weight gradients are cut into blocks
  // (64 images x 17 tokens x dim 32), where a cut by thread count would move the rounding.
  const std::string sizes = " --set model.dim=32 --set model.mlp_dim=64 --set train.batch_size=64"
                            " --set train.max_steps=8 --set optim.ema_decay=0.9"
                            " --set model.drop_path=0.2 --set train.precision=" + precision +
                            " --set model.patch_embed=" + embed +
                            " --set model.patch_drop=" + patch_drop;
  // Twelve threads, more than the batch's 8 chunks of images, take the chunks a thread each
  // with threads to spare (vit_passes.h), where two take several each.
  for (int threads : {1, 2, 12}) {
    const std::string n = std::to_string(threads);
    std::string args = "train --config " + tmp.str("t.toml");
    args += sizes;
    args += " --set train.threads=" + n;
    args += " --out " + tmp.str("t" + n);
    const RunResult r = run_minivit(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  // Weights, optimiser moments and the weights' average, bit for bit.
  CHECK(tensor_values(tmp.str("t1/resume.safetensors")) == tensor_values(tmp.str("t2/resume.safetensors")));
  CHECK(tensor_values(tmp.str("t1/resume.safetensors")) == tensor_values(tmp.str("t12/resume.safetensors")));
}
