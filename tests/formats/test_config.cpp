// Config loading: defaults, a full file, one test per class of reading error (each checking
// that the message names the key and the line), overrides, and the TOML and flat round
// trips. The checks on values are in test_config_checks.cpp.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "minivit/core/error.h"
#include "minivit/formats/config_file.h"
#include "test_util.h"

using Catch::Matchers::Contains;
using minivit::Cifar100Label;
using minivit::Config;
using minivit::DataFormat;
using minivit::LrSchedule;
using minivit::OptimizerKind;
using minivit::parse_config;

namespace {

// Every field, compared exactly: a round trip must not lose even one float bit.
void require_same(const Config& a, const Config& b) {
  CHECK(a.model.image_size == b.model.image_size);
  CHECK(a.model.channels == b.model.channels);
  CHECK(a.model.patch_size == b.model.patch_size);
  CHECK(a.model.dim == b.model.dim);
  CHECK(a.model.depth == b.model.depth);
  CHECK(a.model.heads == b.model.heads);
  CHECK(a.model.mlp_dim == b.model.mlp_dim);
  CHECK(a.model.dropout == b.model.dropout);
  CHECK(a.model.attention_dropout == b.model.attention_dropout);
  CHECK(a.model.drop_path == b.model.drop_path);
  CHECK(a.model.patch_drop == b.model.patch_drop);
  CHECK(a.model.num_classes == b.model.num_classes);
  CHECK(a.model.attention == b.model.attention);
  CHECK(a.model.pos_embed == b.model.pos_embed);
  CHECK(a.model.pool == b.model.pool);
  CHECK(a.model.patch_embed == b.model.patch_embed);
  CHECK(a.model.stem_channels == b.model.stem_channels);
  CHECK(a.data.format == b.data.format);
  CHECK(a.data.path == b.data.path);
  CHECK(a.data.mean == b.data.mean);
  CHECK(a.data.std == b.data.std);
  CHECK(a.data.shuffle == b.data.shuffle);
  CHECK(a.data.augment == b.data.augment);
  CHECK(a.data.val_fraction == b.data.val_fraction);
  CHECK(a.data.class_names == b.data.class_names);
  CHECK(a.data.label == b.data.label);
  CHECK(a.data.resize == b.data.resize);
  CHECK(a.data.crop_padding == b.data.crop_padding);
  CHECK(a.data.hflip == b.data.hflip);
  CHECK(a.data.auto_augment == b.data.auto_augment);
  CHECK(a.data.erasing == b.data.erasing);
  CHECK(a.data.mixup == b.data.mixup);
  CHECK(a.data.cutmix == b.data.cutmix);
  CHECK(a.data.mix_prob == b.data.mix_prob);
  CHECK(a.optim.name == b.optim.name);
  CHECK(a.optim.lr == b.optim.lr);
  CHECK(a.optim.weight_decay == b.optim.weight_decay);
  CHECK(a.optim.beta1 == b.optim.beta1);
  CHECK(a.optim.beta2 == b.optim.beta2);
  CHECK(a.optim.momentum == b.optim.momentum);
  CHECK(a.optim.schedule == b.optim.schedule);
  CHECK(a.optim.warmup_steps == b.optim.warmup_steps);
  CHECK(a.optim.min_lr == b.optim.min_lr);
  CHECK(a.optim.clip_grad_norm == b.optim.clip_grad_norm);
  CHECK(a.optim.label_smoothing == b.optim.label_smoothing);
  CHECK(a.optim.ema_decay == b.optim.ema_decay);
  CHECK(a.train.epochs == b.train.epochs);
  CHECK(a.train.max_steps == b.train.max_steps);
  CHECK(a.train.batch_size == b.train.batch_size);
  CHECK(a.train.seed == b.train.seed);
  CHECK(a.train.threads == b.train.threads);
  CHECK(a.train.out_dir == b.train.out_dir);
  CHECK(a.train.log_every == b.train.log_every);
  CHECK(a.train.eval_every == b.train.eval_every);
  CHECK(a.train.unmasked_epochs == b.train.unmasked_epochs);
  CHECK(a.train.precision == b.train.precision);
}

// A config with no default left and floats that have no short exact decimal form.
Config unusual_config() {
  Config c;
  c.model.image_size = 32;
  c.model.channels = 3;
  c.model.patch_size = 8;
  c.model.dim = 96;
  c.model.depth = 3;
  c.model.heads = 6;
  c.model.mlp_dim = 200;
  c.model.dropout = 0.1f;
  c.model.attention_dropout = 1.0f / 3.0f;
  c.model.drop_path = 0.15f;
  c.model.patch_drop = 0.3f;
  c.model.num_classes = 3;
  c.model.attention = minivit::AttentionForm::cosine;
  c.model.pos_embed = minivit::PosEmbedKind::sincos2d;
  c.model.pool = minivit::PoolKind::mean;
  c.model.patch_embed = minivit::PatchEmbedKind::conv;
  c.model.stem_channels = 24;
  c.data.format = DataFormat::folder;
  c.data.path = "/data/my \"quoted\" dir/ünïcode\tand tab";
  c.data.mean = {0.4914f, 0.4822f, 0.4465f};
  c.data.std = {0.2470f, 0.2435f, 1e-7f};
  c.data.shuffle = false;
  c.data.augment = false;
  c.data.val_fraction = 0.0f;
  c.data.class_names = {"cat", "dog's", "a \"b\""};
  c.data.label = Cifar100Label::coarse;
  c.data.resize = false;
  c.data.crop_padding = 3;
  c.data.hflip = 0.5f;
  c.data.auto_augment = minivit::AutoAugment::trivial;
  c.data.erasing = 0.3f;
  c.data.mixup = 0.8f;
  c.data.cutmix = 1.0f;
  c.data.mix_prob = 0.7f;
  c.optim.name = OptimizerKind::sgd;
  c.optim.lr = 3e-4f;
  c.optim.weight_decay = 0.0f;
  c.optim.beta1 = 0.85f;
  c.optim.beta2 = 0.98765432f;
  c.optim.momentum = 0.0f;
  c.optim.schedule = LrSchedule::constant;
  c.optim.warmup_steps = 5000000000;  // does not fit in 32 bits
  c.optim.min_lr = 1.17549435e-38f;   // smallest normal float
  c.optim.clip_grad_norm = 1.0f;
  c.optim.label_smoothing = 0.1f;
  c.optim.ema_decay = 0.9999f;
  c.train.epochs = 7;
  c.train.max_steps = 123;
  c.train.batch_size = 1;
  c.train.seed = 9223372036854775807ull;
  c.train.threads = 2;
  c.train.out_dir = "runs/x y";
  c.train.log_every = 3;
  c.train.eval_every = 2;
  c.train.unmasked_epochs = 3;
  c.train.precision = minivit::Precision::bf16;
  return c;
}

}  // namespace

TEST_CASE("an empty file gives the defaults", "[config]") {
  Config parsed = parse_config("", "empty.toml");
  require_same(parsed, Config{});
  CHECK(parsed.source == "empty.toml");
  CHECK(parsed.model.dim == 64);
  CHECK(parsed.data.mean == std::vector<float>{0.2860f});
  CHECK(parsed.optim.name == OptimizerKind::adamw);
}

TEST_CASE("missing sections and keys keep their defaults", "[config]") {
  Config parsed = parse_config("[model]\ndim = 32\n\n[train]\n", "part.toml");
  Config expected;
  expected.model.dim = 32;
  require_same(parsed, expected);
}

TEST_CASE("a full file is read into every field", "[config]") {
  minivit_test::TempDir dir("config_full");
  std::string path = dir.str("run.toml");
  std::ofstream(path) << R"(# a comment
[model]
image_size = 32
channels = 3
patch_size = 8
dim = 96
depth = 3
heads = 6
mlp_dim = 200
dropout = 0.1
attention_dropout = 0   # an integer is accepted for a float
num_classes = 3

[data]
format = "cifar10"
path = '/data/cifar'
mean = [0.4914, 0.4822, 0.4465]
std = [0.247, 0.2435, 0.2616]
shuffle = false
augment = false
val_fraction = 0.2
class_names = ["a", "b", "c"]

[optim]
name = "sgd"
lr = 1e-2
weight_decay = 5e-4
beta1 = 0.8
beta2 = 0.95
momentum = 0.5
schedule = "constant"
warmup_steps = 100
min_lr = 1e-5
clip_grad_norm = 1.0
label_smoothing = 0.1

[train]
epochs = 3
max_steps = 1000
batch_size = 32
seed = 42
threads = 2
out_dir = "runs/cifar"
log_every = 10
eval_every = 2
)";
  Config c = minivit::load_config(path);
  CHECK(c.source == path);
  CHECK(c.model.image_size == 32);
  CHECK(c.model.channels == 3);
  CHECK(c.model.patch_size == 8);
  CHECK(c.model.dim == 96);
  CHECK(c.model.depth == 3);
  CHECK(c.model.heads == 6);
  CHECK(c.model.mlp_dim == 200);
  CHECK(c.model.dropout == 0.1f);
  CHECK(c.model.attention_dropout == 0.0f);
  CHECK(c.model.num_classes == 3);
  CHECK(c.data.format == DataFormat::cifar10);
  CHECK(c.data.path == "/data/cifar");
  CHECK(c.data.mean == std::vector<float>{0.4914f, 0.4822f, 0.4465f});
  CHECK(c.data.std == std::vector<float>{0.247f, 0.2435f, 0.2616f});
  CHECK_FALSE(c.data.shuffle);
  CHECK_FALSE(c.data.augment);
  CHECK(c.data.val_fraction == 0.2f);
  CHECK(c.data.class_names == std::vector<std::string>{"a", "b", "c"});
  CHECK(c.optim.name == OptimizerKind::sgd);
  CHECK(c.optim.lr == 1e-2f);
  CHECK(c.optim.weight_decay == 5e-4f);
  CHECK(c.optim.beta1 == 0.8f);
  CHECK(c.optim.beta2 == 0.95f);
  CHECK(c.optim.momentum == 0.5f);
  CHECK(c.optim.schedule == LrSchedule::constant);
  CHECK(c.optim.warmup_steps == 100);
  CHECK(c.optim.min_lr == 1e-5f);
  CHECK(c.optim.clip_grad_norm == 1.0f);
  CHECK(c.optim.label_smoothing == 0.1f);
  CHECK(c.train.epochs == 3);
  CHECK(c.train.max_steps == 1000);
  CHECK(c.train.batch_size == 32);
  CHECK(c.train.seed == 42);
  CHECK(c.train.threads == 2);
  CHECK(c.train.out_dir == "runs/cifar");
  CHECK(c.train.log_every == 10);
  CHECK(c.train.eval_every == 2);
}

TEST_CASE("a file that cannot be read names its path", "[config]") {
  REQUIRE_THROWS_WITH(minivit::load_config("/nonexistent/minivit.toml"),
                      Contains("/nonexistent/minivit.toml"));
}

TEST_CASE("TOML syntax errors are one line with file and line", "[config]") {
  std::string text = "[model]\ndim = 64\ndepth = = 2\n";
  REQUIRE_THROWS_AS(parse_config(text, "bad.toml"), minivit::Error);
  REQUIRE_THROWS_WITH(parse_config(text, "bad.toml"), Contains("bad.toml:3: "));
  try {
    parse_config("[model]\ndim = 1\ndim = 2\n", "dup.toml");
    FAIL("no error");
  } catch (const minivit::Error& e) {
    std::string message = e.what();
    CHECK_THAT(message, Contains("dup.toml:3: "));
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("an unknown section is an error naming it and its line", "[config]") {
  std::string text = "[model]\ndim = 64\n\n[modle]\ndepth = 2\n";
  REQUIRE_THROWS_WITH(parse_config(text, "cfg.toml"),
                      Contains("cfg.toml:4: unknown section [modle]"));
  // A key before any section is not silently dropped either.
  REQUIRE_THROWS_WITH(parse_config("dim = 64\n", "cfg.toml"),
                      Contains("cfg.toml:1: key 'dim' is outside any section"));
  // Nor is a sub-table of a known section.
  REQUIRE_THROWS_WITH(parse_config("[model]\ndim = 64\n[model.extra]\nx = 1\n", "cfg.toml"),
                      Contains("cfg.toml:3: unknown key 'model.extra'"));
}

TEST_CASE("an unknown key is an error naming it, its line and the known keys", "[config]") {
  std::string text = "[model]\ndim = 64\n\n[optim]\nlr = 0.1\nlearning_rate = 0.1\n";
  REQUIRE_THROWS_WITH(parse_config(text, "cfg.toml"),
                      Contains("cfg.toml:6: unknown key 'optim.learning_rate'") &&
                          Contains("weight_decay"));
}

TEST_CASE("the first problem in file order is reported", "[config]") {
  // toml++ sorts keys by name; "zzz" on line 2 must win over "aaa" on line 3.
  std::string text = "[train]\nzzz = 1\naaa = 2\n";
  REQUIRE_THROWS_WITH(parse_config(text, "cfg.toml"),
                      Contains("cfg.toml:2: unknown key 'train.zzz'"));
}

TEST_CASE("a value of the wrong type is an error with key, line and value", "[config]") {
  REQUIRE_THROWS_WITH(parse_config("[model]\n\ndim = 6.5\n", "cfg.toml"),
                      "cfg.toml:3: key 'model.dim': expected an integer, got 6.5");
  REQUIRE_THROWS_WITH(parse_config("[data]\nshuffle = \"yes\"\n", "cfg.toml"),
                      "cfg.toml:2: key 'data.shuffle': expected true or false, got \"yes\"");
  REQUIRE_THROWS_WITH(parse_config("[optim]\nlr = \"fast\"\n", "cfg.toml"),
                      "cfg.toml:2: key 'optim.lr': expected a number, got \"fast\"");
  REQUIRE_THROWS_WITH(parse_config("[data]\nformat = 3\n", "cfg.toml"),
                      "cfg.toml:2: key 'data.format': expected a string, got 3");
  REQUIRE_THROWS_WITH(parse_config("[data]\nmean = 0.5\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.mean': expected an array of numbers"));
  REQUIRE_THROWS_WITH(parse_config("[data]\nmean = [0.5, \"x\"]\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.mean'") && Contains("[0.5, \"x\"]"));
  REQUIRE_THROWS_WITH(parse_config("[data]\nclass_names = [1, 2]\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.class_names': expected an array of strings"));
  REQUIRE_THROWS_WITH(parse_config("[model]\ndim = 4294967296\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'model.dim': expected a 32-bit integer"));
  REQUIRE_THROWS_WITH(parse_config("[train]\nseed = -1\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'train.seed': expected a non-negative integer"));
  REQUIRE_THROWS_WITH(parse_config("[data]\nmean = [1e300]\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'data.mean'") && Contains("float range"));
  REQUIRE_THROWS_WITH(parse_config("[optim]\nlr = inf\n", "cfg.toml"),
                      Contains("cfg.toml:2: key 'optim.lr': expected a finite number"));
  REQUIRE_THROWS_WITH(parse_config("model = 3\n", "cfg.toml"),
                      Contains("cfg.toml:1: key 'model': expected a section [model]"));
}

TEST_CASE("overrides win over the file", "[config]") {
  std::string text = "[model]\ndim = 32\nheads = 4\n[optim]\nlr = 0.1\n";
  Config c = parse_config(text, "cfg.toml",
                          {"model.dim=128", "optim.lr = 2e-3", "data.mean=[0.5]",
                           "data.shuffle=false", "train.out_dir=\"runs/quoted\""});
  CHECK(c.model.dim == 128);
  CHECK(c.model.heads == 4);
  CHECK(c.optim.lr == 2e-3f);
  CHECK(c.data.mean == std::vector<float>{0.5f});
  CHECK_FALSE(c.data.shuffle);
  CHECK(c.train.out_dir == "runs/quoted");
  // The last of two overrides of one key wins.
  CHECK(parse_config("", "x", {"model.depth=2", "model.depth=3"}).model.depth == 3);
}

TEST_CASE("an override may be a bare string", "[config]") {
  Config c = parse_config("", "cfg.toml",
                          {"data.format=cifar100", "data.path=/data/cifar-100",
                           "train.out_dir=2024",
                           "model.channels=3", "data.mean=[0.5,0.5,0.5]",
                           "data.std=[0.25, 0.25, 0.25]", "model.image_size=32"});
  CHECK(c.data.format == DataFormat::cifar100);
  CHECK(c.data.path == "/data/cifar-100");
  CHECK(c.train.out_dir == "2024");  // a number, taken literally for a string key
}

TEST_CASE("override errors name the override", "[config]") {
  // A newline cannot sneak a second key in, nor break the message over two lines.
  REQUIRE_THROWS_WITH(parse_config("", "cfg.toml", {"model.dim=1\nmodel.depth=2"}),
                      "--set model.dim=1 model.depth=2: key 'model.dim': expected an integer, "
                      "got \"1\\nmodel.depth=2\"");
  REQUIRE_THROWS_WITH(parse_config("", "cfg.toml", {"model.dimm=3"}),
                      Contains("--set model.dimm=3: unknown key 'model.dimm'"));
  REQUIRE_THROWS_WITH(parse_config("", "cfg.toml", {"nosection=3"}),
                      Contains("--set nosection=3: unknown key 'nosection'"));
  REQUIRE_THROWS_WITH(parse_config("", "cfg.toml", {"model.dim"}),
                      Contains("--set model.dim: expected section.key=value"));
  REQUIRE_THROWS_WITH(parse_config("", "cfg.toml", {"model.dim=big"}),
                      "--set model.dim=big: key 'model.dim': expected an integer, got \"big\"");
  // A check between keys points at the override that broke it, not at the file.
  REQUIRE_THROWS_WITH(parse_config("[model]\ndim = 64\n", "cfg.toml", {"model.heads=5"}),
                      "--set model.heads=5: key 'model.heads': 5 does not divide model.dim = 64");
  REQUIRE_THROWS_WITH(parse_config("[optim]\nlr = 0.1\n", "cfg.toml", {"optim.lr=-1"}),
                      Contains("--set optim.lr=-1: key 'optim.lr'"));
  REQUIRE_THROWS_WITH(parse_config("", "cfg.toml", {"data.format=csv"}),
                      Contains("--set data.format=csv: key 'data.format'"));
  // Text that is not UTF-8 (a Latin-1 byte, a truncated sequence, an overlong form, a
  // surrogate) would not come back the same from config.toml; UTF-8 text is fine.
  for (const char* path : {"/d\xe9p", "/tm\xe2p/x", "/x\xe2\x82", "/\xc0\xaf", "/\xed\xa0\x80"})
    REQUIRE_THROWS_WITH(parse_config("", "cfg.toml", {std::string("data.path=") + path}),
                        Contains("not valid UTF-8"));
  CHECK(parse_config("", "cfg.toml", {"data.path=/données/\xe2\x82\xac"}).data.path ==
        "/données/\xe2\x82\xac");
}

TEST_CASE("choices are read and written as the same words", "[config]") {
  const Config c = parse_config(
      "[data]\nformat = \"cifar100\"\nlabel = \"coarse\"\n"
      "[model]\npos_embed = \"none\"\npool = \"mean\"\n"
      "[optim]\nname = \"sgd\"\nschedule = \"constant\"\n",
      "cfg.toml", {"model.channels=3", "data.mean=[0.5,0.5,0.5]", "data.std=[0.2,0.2,0.2]"});
  CHECK(c.data.format == DataFormat::cifar100);
  CHECK(c.data.label == Cifar100Label::coarse);
  CHECK(c.optim.name == OptimizerKind::sgd);
  CHECK(c.optim.schedule == LrSchedule::constant);
  CHECK(c.model.pos_embed == minivit::PosEmbedKind::none);
  CHECK(c.model.pool == minivit::PoolKind::mean);
  const std::string text = minivit::config_to_toml(c);
  CHECK_THAT(text, Contains("format = \"cifar100\"\n") && Contains("label = \"coarse\"\n") &&
                       Contains("name = \"sgd\"\n") && Contains("schedule = \"constant\"\n") &&
                       Contains("pos_embed = \"none\"\n") && Contains("pool = \"mean\"\n"));
  CHECK(minivit::config_name(DataFormat::idx) == "idx");
  CHECK(minivit::config_name(DataFormat::folder) == "folder");
  CHECK(minivit::config_name(Cifar100Label::fine) == "fine");
  CHECK(minivit::config_name(OptimizerKind::adamw) == "adamw");
  CHECK(minivit::config_name(LrSchedule::cosine) == "cosine");
  CHECK(minivit::config_name(minivit::PosEmbedKind::sincos2d) == "sincos2d");
  CHECK(minivit::config_name(minivit::PoolKind::cls) == "cls");
}

TEST_CASE("config_to_toml reads back to the same config", "[config]") {
  SECTION("defaults") {
    Config back = parse_config(minivit::config_to_toml(Config{}), "rt.toml");
    require_same(back, Config{});
  }
  SECTION("every field changed, awkward floats and strings") {
    Config original = unusual_config();
    std::string text = minivit::config_to_toml(original);
    INFO(text);
    Config back = parse_config(text, "rt.toml");
    require_same(back, original);
    // Written in full and in order, so the file documents the run.
    CHECK_THAT(text, Contains("[model]\nimage_size = 32\n"));
    CHECK_THAT(text, Contains("\n[train]\n"));
    CHECK_THAT(text, Contains("clip_grad_norm = 1.0\n"));
  }
  SECTION("via a file") {
    minivit_test::TempDir dir("config_rt");
    std::string path = dir.str("config.toml");
    std::ofstream(path) << minivit::config_to_toml(unusual_config());
    require_same(minivit::load_config(path), unusual_config());
  }
}

TEST_CASE("config_to_flat and config_from_flat invert each other", "[config]") {
  auto flat = minivit::config_to_flat(Config{});
  CHECK(flat.size() == 56);
  auto has = [&](const std::string& key, const std::string& value) {
    for (const auto& [k, v] : flat)
      if (k == key) return v == value;
    return false;
  };
  CHECK(has("model.dim", "64"));
  CHECK(has("data.format", "\"idx\""));
  CHECK(has("model.attention", "\"scaled_dot\""));
  CHECK(has("data.mean", "[0.286]"));
  CHECK(has("data.class_names", "[]"));
  CHECK(has("data.shuffle", "true"));
  CHECK(has("train.precision", "\"fp32\""));

  require_same(minivit::config_from_flat(flat, "ckpt"), Config{});
  Config original = unusual_config();
  Config back = minivit::config_from_flat(minivit::config_to_flat(original), "ckpt");
  require_same(back, original);
  CHECK(back.source == "ckpt");
}

TEST_CASE("config_from_flat keeps defaults for missing keys and rejects unknown ones",
          "[config]") {
  Config c = minivit::config_from_flat({{"model.dim", "32"}, {"model.heads", "2"}}, "old.ckpt");
  Config expected;
  expected.model.dim = 32;
  expected.model.heads = 2;
  require_same(c, expected);
  REQUIRE_THROWS_WITH(minivit::config_from_flat({{"model.future_key", "1"}}, "new.ckpt"),
                      Contains("new.ckpt: unknown key 'model.future_key'"));
  REQUIRE_THROWS_WITH(minivit::config_from_flat({{"model.dim", "abc"}}, "bad.ckpt"),
                      Contains("bad.ckpt: key 'model.dim'"));
  REQUIRE_THROWS_WITH(minivit::config_from_flat({{"model.dim", "\"64\""}}, "bad.ckpt"),
                      Contains("bad.ckpt: key 'model.dim': expected an integer"));
  REQUIRE_THROWS_WITH(minivit::config_from_flat({{"model.heads", "5"}}, "bad.ckpt"),
                      Contains("bad.ckpt: key 'model.dim'"));
}

TEST_CASE("every shipped config parses and describes a model that fits its data format",
          "[config]") {
  const std::filesystem::path dir = std::filesystem::path(MINIVIT_SOURCE_DIR) / "configs";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    INFO(entry.path().string());
    const Config c = minivit::load_config(entry.path().string());
    CHECK(c.model.image_size % c.model.patch_size == 0);
    if (c.data.format == DataFormat::cifar10 || c.data.format == DataFormat::cifar100) {
      CHECK(c.model.image_size == 32);
      CHECK(c.model.channels == 3);
      CHECK(c.model.num_classes == (c.data.format == DataFormat::cifar10  ? 10
                                    : c.data.label == Cifar100Label::fine ? 100
                                                                          : 20));
    }
    ++checked;
  }
  CHECK(checked >= 6);
}
