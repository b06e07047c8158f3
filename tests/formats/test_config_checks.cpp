// Config checks: each impossible value or combination of keys is refused with a message
// naming the key and the line (or override) to fix; configs built in code are checked too.
#include <catch2/catch.hpp>
#include <string>

#include "minivit/formats/config_file.h"

using Catch::Matchers::Contains;
using minivit::Config;
using minivit::parse_config;

TEST_CASE("dim not divisible by heads names the line of the key", "[config]") {
  REQUIRE_THROWS_WITH(parse_config("[model]\ndim = 100\nheads = 3\n", "cfg.toml"),
                      "cfg.toml:2: key 'model.dim': 100 is not divisible by model.heads = 3");
  // Only heads was written: that is the line to fix.
  REQUIRE_THROWS_WITH(parse_config("[model]\n\nheads = 5\n", "cfg.toml"),
                      "cfg.toml:3: key 'model.heads': 5 does not divide model.dim = 64");
}

TEST_CASE("image_size not divisible by patch_size names the line of the key", "[config]") {
  REQUIRE_THROWS_WITH(parse_config("[model]\nimage_size = 30\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'model.image_size': 30 is not divisible by "
                               "model.patch_size = 4"));
}

TEST_CASE("the sincos2d position table needs dim divisible by 4", "[config][forms]") {
  CHECK_NOTHROW(parse_config("[model]\ndim = 64\npos_embed = \"sincos2d\"\n", "cfg.toml"));
  CHECK_NOTHROW(parse_config("[model]\ndim = 66\nheads = 2\npos_embed = \"none\"\n", "cfg.toml"));
  REQUIRE_THROWS_WITH(parse_config("[model]\npos_embed = \"sincos2d\"\ndim = 66\nheads = 2\n", "cfg.toml"),
                      "cfg.toml:3: key 'model.dim': 66 is not divisible by 4, as "
                      "model.pos_embed = \"sincos2d\" needs");
  // The key changed last is the one named.
  REQUIRE_THROWS_WITH(parse_config("[model]\ndim = 66\nheads = 2\n", "cfg.toml",
                                   {"model.pos_embed=sincos2d"}),
                      "--set model.pos_embed=sincos2d: key 'model.pos_embed': \"sincos2d\" needs "
                      "model.dim divisible by 4, but model.dim = 66");
  REQUIRE_THROWS_WITH(parse_config("[model]\npos_embed = \"fixed\"\n", "cfg.toml"),
                      "cfg.toml:2: key 'model.pos_embed': expected one of \"learned\", "
                      "\"sincos2d\", \"none\", got \"fixed\"");
}

TEST_CASE("shifted patches need patches of 2 pixels or more", "[config][forms]") {
  CHECK(parse_config("", "cfg.toml").model.patch_embed == minivit::PatchEmbedKind::linear);
  CHECK(parse_config("[model]\npatch_embed = \"shifted\"\n", "cfg.toml").model.patch_embed ==
        minivit::PatchEmbedKind::shifted);
  CHECK_NOTHROW(parse_config("[model]\npatch_size = 1\n", "cfg.toml"));
  REQUIRE_THROWS_WITH(parse_config("[model]\npatch_embed = \"shifted\"\npatch_size = 1\n", "cfg.toml"),
                      "cfg.toml:3: key 'model.patch_size': 1 leaves nothing to shift by, as "
                      "model.patch_embed = \"shifted\" needs patches of 2 pixels or more");
  REQUIRE_THROWS_WITH(parse_config("[model]\npatch_size = 1\n", "cfg.toml",
                                   {"model.patch_embed=shifted"}),
                      "--set model.patch_embed=shifted: key 'model.patch_embed': \"shifted\" "
                      "needs model.patch_size >= 2, but model.patch_size = 1");
  REQUIRE_THROWS_WITH(parse_config("[model]\npatch_embed = \"convolution\"\n", "cfg.toml"),
                      "cfg.toml:2: key 'model.patch_embed': expected one of \"linear\", "
                      "\"shifted\", \"conv\", got \"convolution\"");
}

TEST_CASE("a conv stem needs patches of a power of two pixels", "[config][forms]") {
  const auto conv = parse_config("[model]\npatch_embed = \"conv\"\nstem_channels = 16\n", "cfg.toml");
  CHECK(conv.model.patch_embed == minivit::PatchEmbedKind::conv);
  CHECK(conv.model.stem_channels == 16);
  CHECK(parse_config("", "cfg.toml").model.stem_channels == 32);
  CHECK_NOTHROW(parse_config("[model]\npatch_embed = \"conv\"\npatch_size = 2\nimage_size = 28\n",
                             "cfg.toml"));
  // 28 is divisible by 7, but halving twice does not reach 7-pixel patches.
  REQUIRE_THROWS_WITH(
      parse_config("[model]\npatch_embed = \"conv\"\npatch_size = 7\n", "cfg.toml"),
      "cfg.toml:3: key 'model.patch_size': 7 is not a power of two of at least 2, as "
      "model.patch_embed = \"conv\" needs (one stride-2 convolution per halving)");
  REQUIRE_THROWS_WITH(
      parse_config("[model]\npatch_size = 1\n", "cfg.toml", {"model.patch_embed=conv"}),
      "--set model.patch_embed=conv: key 'model.patch_embed': \"conv\" needs model.patch_size a "
      "power of two of at least 2, but model.patch_size = 1");
  REQUIRE_THROWS_WITH(parse_config("[model]\nstem_channels = 0\n", "cfg.toml"),
                      "cfg.toml:2: key 'model.stem_channels': expected a positive integer up to "
                      "65536, got 0");
  REQUIRE_THROWS_WITH(
      parse_config("[model]\npatch_embed = \"conv\"\nimage_size = 256\npatch_size = 256\n"
                   "stem_channels = 1024\n", "cfg.toml"),
      "cfg.toml:5: key 'model.stem_channels': 1024 doubled at each of the 8 convolutions "
      "exceeds 65536 channels");
}

TEST_CASE("out-of-range values name the key and line", "[config]") {
  REQUIRE_THROWS_WITH(parse_config("[optim]\nname = \"sgd\"\nlr = -0.1\n", "cfg.toml"),
                      "cfg.toml:3: key 'optim.lr': expected a value > 0, got -0.1");
  REQUIRE_THROWS_WITH(parse_config("[model]\ndropout = 1.0\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'model.dropout': expected a value in [0, 1)"));
  REQUIRE_THROWS_WITH(parse_config("[model]\ndrop_path = 1\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'model.drop_path': expected a value in [0, 1)"));
  REQUIRE_THROWS_WITH(parse_config("[model]\ndrop_path = -0.1\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'model.drop_path': expected a value in [0, 1)"));
  REQUIRE_THROWS_WITH(parse_config("[model]\npatch_drop = 1.0\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'model.patch_drop': expected a value in [0, 1)"));
  REQUIRE_THROWS_WITH(parse_config("[model]\ndepth = 0\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'model.depth': expected a positive integer"));
  REQUIRE_THROWS_WITH(parse_config("[model]\nnum_classes = 1\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'model.num_classes'"));
  REQUIRE_THROWS_WITH(parse_config("[optim]\nbeta2 = 1\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'optim.beta2'"));
  REQUIRE_THROWS_WITH(parse_config("[optim]\nwarmup_steps = -1\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'optim.warmup_steps': expected a value >= 0"));
  REQUIRE_THROWS_WITH(parse_config("[train]\nbatch_size = 0\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'train.batch_size': expected a value >= 1"));
  REQUIRE_THROWS_WITH(parse_config("[train]\nlog_every = 0\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'train.log_every'"));
  REQUIRE_THROWS_WITH(parse_config("[data]\nstd = [0.0]\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.std': expected values > 0"));
  REQUIRE_THROWS_WITH(parse_config("[data]\nval_fraction = -0.5\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.val_fraction'"));
  // Sizes no machine could hold are refused before any arithmetic on them can overflow.
  REQUIRE_THROWS_WITH(parse_config("[model]\ndim = 1000000\nheads = 1\n", "cfg.toml"),
                      "cfg.toml:2: key 'model.dim': expected a positive integer up to 65536, got 1000000");
  REQUIRE_THROWS_WITH(parse_config("[model]\nnum_classes = 2000000000\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'model.num_classes'"));
  REQUIRE_THROWS_WITH(parse_config("[train]\nthreads = 100000\n", "cfg.toml"),
                      "cfg.toml:2: key 'train.threads': expected 0 (all cores) up to 1024, got 100000");
}

TEST_CASE("augmentation keys are checked", "[config]") {
  REQUIRE_THROWS_WITH(parse_config("[data]\ncrop_padding = -1\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.crop_padding': expected 0 (off) up to"));
  REQUIRE_THROWS_WITH(parse_config("[data]\ncrop_padding = 28\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.crop_padding'") && Contains("got 28"));
  REQUIRE_THROWS_WITH(parse_config("[data]\nhflip = 1.5\n", "cfg.toml"),
                      "cfg.toml:2: key 'data.hflip': expected a probability in [0, 1], got 1.5");
  REQUIRE_THROWS_WITH(parse_config("[data]\nerasing = -0.1\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.erasing'"));
  REQUIRE_THROWS_WITH(parse_config("[data]\nmixup = -1.0\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.mixup': expected a value >= 0"));
  REQUIRE_THROWS_WITH(parse_config("[data]\ncutmix = nan\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.cutmix': expected a finite number"));
  REQUIRE_THROWS_WITH(parse_config("[data]\nmix_prob = 2\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.mix_prob'"));
  REQUIRE_THROWS_WITH(parse_config("[data]\nlabel = \"medium\"\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.label': expected one of \"fine\", \"coarse\""));
  // Probabilities include 1: every image flipped is a valid choice.
  CHECK_NOTHROW(parse_config("[data]\nhflip = 1.0\nerasing = 1.0\nmix_prob = 1.0\n", "ok"));
}

TEST_CASE("mean and std must have one value per channel", "[config]") {
  REQUIRE_THROWS_WITH(parse_config("[data]\nmean = [0.5, 0.5]\n", "cfg.toml"),
                      "cfg.toml:2: key 'data.mean': expected one value per channel "
                      "(model.channels = 1), got [0.5, 0.5]");
  // Only channels was written: point there.
  REQUIRE_THROWS_WITH(parse_config("[model]\nchannels = 3\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'model.channels': 3 channels but data.mean"));
  CHECK_NOTHROW(parse_config(
      "[model]\nchannels = 3\n[data]\nmean = [0.5, 0.5, 0.5]\nstd = [0.2, 0.2, 0.2]\n", "ok"));
}

TEST_CASE("class_names must be empty or one per class", "[config]") {
  REQUIRE_THROWS_WITH(parse_config("[data]\nclass_names = [\"a\", \"b\"]\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.class_names': expected 10 names"));
}

TEST_CASE("enumerations reject unknown choices", "[config]") {
  REQUIRE_THROWS_WITH(parse_config("[data]\nformat = \"csv\"\n", "cfg.toml"),
                      "cfg.toml:2: key 'data.format': expected one of \"idx\", \"cifar10\", "
                      "\"cifar100\", \"folder\", got \"csv\"");
  REQUIRE_THROWS_WITH(parse_config("[optim]\nname = \"adam\"\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'optim.name'") && Contains("\"adam\""));
  REQUIRE_THROWS_WITH(parse_config("[optim]\nschedule = \"linear\"\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'optim.schedule'"));
  REQUIRE_THROWS_WITH(parse_config("[model]\nattention = \"scaled\"\n", "cfg.toml"),
                      "cfg.toml:2: key 'model.attention': expected one of \"scaled_dot\", "
                      "\"dot\", \"additive\", \"cosine\", \"lsa\", got \"scaled\"");
  CHECK(parse_config("[model]\nattention = \"additive\"\n", "cfg.toml").model.attention ==
        minivit::AttentionForm::additive);
  CHECK(parse_config("", "cfg.toml", {"model.attention=cosine"}).model.attention ==
        minivit::AttentionForm::cosine);
  CHECK(parse_config("[data]\nauto_augment = \"trivial\"\n", "cfg.toml").data.auto_augment ==
        minivit::AutoAugment::trivial);
  REQUIRE_THROWS_WITH(parse_config("[data]\nauto_augment = \"rand-m9\"\n", "cfg.toml"),
                      "cfg.toml:2: key 'data.auto_augment': expected one of \"none\", "
                      "\"trivial\", got \"rand-m9\"");
  REQUIRE_THROWS_WITH(parse_config("[model]\npool = \"max\"\n", "cfg.toml"),
                      "cfg.toml:2: key 'model.pool': expected one of \"cls\", \"mean\", \"seq\", "
                      "got \"max\"");
  REQUIRE_THROWS_WITH(parse_config("[train]\nprecision = \"fp16\"\n", "cfg.toml"),
                      "cfg.toml:2: key 'train.precision': expected one of \"fp32\", \"bf16\", got "
                      "\"fp16\"");
  CHECK(parse_config("", "cfg.toml").train.precision == minivit::Precision::fp32);
  CHECK(parse_config("", "cfg.toml", {"train.precision=bf16"}).train.precision ==
        minivit::Precision::bf16);
}

TEST_CASE("validate_config checks configs built in code, without a line", "[config]") {
  Config c;
  c.source = "mem";
  CHECK_NOTHROW(minivit::validate_config(c));
  c.model.dim = 100;
  c.model.heads = 3;
  REQUIRE_THROWS_WITH(minivit::validate_config(c),
                      "mem: key 'model.dim': 100 is not divisible by model.heads = 3");
  Config nameless;
  nameless.optim.lr = 0;
  REQUIRE_THROWS_WITH(minivit::validate_config(nameless), Contains("key 'optim.lr'"));
  Config huge_seed;
  huge_seed.train.seed = ~0ull;  // not representable as a TOML integer
  REQUIRE_THROWS_WITH(minivit::validate_config(huge_seed), Contains("key 'train.seed'"));
}

TEST_CASE("the weights' moving average takes a decay of at least 0 and below 1", "[config][ema]") {
  CHECK(parse_config("[optim]\nema_decay = 0.999\n", "cfg.toml").optim.ema_decay == 0.999f);
  CHECK(parse_config("", "cfg.toml").optim.ema_decay == 0.0f);  // off unless asked for
  REQUIRE_THROWS_WITH(parse_config("[optim]\nema_decay = 1.0\n", "cfg.toml"),
                      "cfg.toml:2: key 'optim.ema_decay': expected a value in [0, 1), got 1.0");
  REQUIRE_THROWS_WITH(parse_config("", "cfg.toml", {"optim.ema_decay=-0.5"}),
                      Contains("optim.ema_decay") && Contains("-0.5"));
}

TEST_CASE("train.unmasked_epochs needs patch dropout to turn off and an epoch with it before",
          "[config][patch_drop]") {
  const auto tail = parse_config("[model]\npatch_drop = 0.5\n[train]\nepochs = 10\n"
                                 "unmasked_epochs = 2\n", "cfg.toml");
  CHECK(tail.train.unmasked_epochs == 2);
  CHECK(parse_config("", "cfg.toml").train.unmasked_epochs == 0);
  REQUIRE_THROWS_WITH(parse_config("[train]\nunmasked_epochs = 2\n", "cfg.toml"),
                      "cfg.toml:2: key 'train.unmasked_epochs': 2 turns off a patch dropout that "
                      "is not on: it needs model.patch_drop > 0");
  REQUIRE_THROWS_WITH(parse_config("[train]\nunmasked_epochs = 2\n", "cfg.toml",
                                   {"model.patch_drop=0"}),
                      "--set model.patch_drop=0: key 'model.patch_drop': 0 leaves "
                      "train.unmasked_epochs = 2 nothing to turn off");
  REQUIRE_THROWS_WITH(parse_config("[model]\npatch_drop = 0.5\n[train]\nepochs = 4\n"
                                   "unmasked_epochs = 4\n", "cfg.toml"),
                      "cfg.toml:5: key 'train.unmasked_epochs': expected fewer than "
                      "train.epochs = 4, got 4");
  REQUIRE_THROWS_WITH(parse_config("[model]\npatch_drop = 0.5\n[train]\nunmasked_epochs = 3\n",
                                   "cfg.toml", {"train.epochs=3"}),
                      "--set train.epochs=3: key 'train.epochs': 3 leaves no epoch with patch "
                      "dropout before train.unmasked_epochs = 3");
  // A run counted in steps cuts the tail to fit.
  CHECK_NOTHROW(parse_config("[model]\npatch_drop = 0.5\n[train]\nepochs = 4\nmax_steps = 100\n"
                             "unmasked_epochs = 4\n", "cfg.toml"));
  REQUIRE_THROWS_WITH(parse_config("[model]\npatch_drop = 0.5\n[train]\nunmasked_epochs = -1\n",
                                   "cfg.toml"),
                      Contains("cfg.toml:4: key 'train.unmasked_epochs'"));
}
