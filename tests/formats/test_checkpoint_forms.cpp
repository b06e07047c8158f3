// Checkpoints of every model form: saved and loaded back with the same tensors and config;
// a checkpoint without the form keys (from before they existed) loads as the default form;
// the resume state refuses a config of another form.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "minivit/core/error.h"
#include "minivit/formats/checkpoint.h"
#include "minivit/formats/config_file.h"
#include "minivit/formats/safetensors.h"
#include "test_util.h"

using namespace minivit;
using minivit_test::TempDir;
using Catch::Matchers::Contains;

namespace {

Config tiny_config_of_form(PosEmbedKind pos_embed, PoolKind pool = PoolKind::cls) {
  Config c;
  c.model.image_size = 8;
  c.model.patch_size = 4;
  c.model.dim = 8;
  c.model.depth = 1;
  c.model.heads = 2;
  c.model.mlp_dim = 16;
  c.model.num_classes = 3;
  c.model.pos_embed = pos_embed;
  c.model.pool = pool;
  return c;
}

const std::vector<std::string> kClassNames = {"a", "b", "c"};

}  // namespace

TEST_CASE("every model form round-trips through a checkpoint", "[checkpoint][forms]") {
  for (PosEmbedKind pos_embed : {PosEmbedKind::learned, PosEmbedKind::sincos2d, PosEmbedKind::none})
  for (PoolKind pool : {PoolKind::cls, PoolKind::mean}) {
    const Config config = tiny_config_of_form(pos_embed, pool);
    INFO("pos_embed " << config_name(pos_embed) << ", pool " << config_name(pool));
    ViT model(config.model);
    model.init(21);
    TempDir dir("ckpt_forms");
    const std::string path = dir.str("model.safetensors");
    TrainingProgress progress;
    progress.step = 7;
    save_checkpoint(path, model, config, kClassNames, progress);

    const SafetensorsFile file = read_safetensors(path);
    CHECK(file.metadata.at("minivit.model.pos_embed") == "\"" + std::string(config_name(pos_embed)) + "\"");
    CHECK(file.metadata.at("minivit.model.pool") == "\"" + std::string(config_name(pool)) + "\"");
    std::vector<std::string> names;
    for (const ParamSpec& s : model.specs) names.push_back(s.name);
    CHECK(file.order == names);

    const Checkpoint back = load_checkpoint(path);
    CHECK(back.config.model.pos_embed == pos_embed);
    CHECK(back.config.model.pool == pool);
    CHECK(config_to_toml(back.config) == config_to_toml(config));
    CHECK(back.progress.step == 7);
    REQUIRE(back.model->num_params == model.num_params);
    CHECK(std::vector<float>(back.model->weights.begin(), back.model->weights.end()) ==
          std::vector<float>(model.weights.begin(), model.weights.end()));
    for (size_t i = 0; i < model.specs.size(); ++i)
      CHECK(back.model->specs[i].trainable == model.specs[i].trainable);
  }
}

TEST_CASE("a checkpoint without the form keys loads as a learned position embedding and CLS pooling",
          "[checkpoint][forms]") {
  const Config config = tiny_config_of_form(PosEmbedKind::learned);
  ViT model(config.model);
  model.init(22);
  TempDir dir("ckpt_old");
  save_checkpoint(dir.str("new.safetensors"), model, config, kClassNames, {});
  SafetensorsFile file = read_safetensors(dir.str("new.safetensors"));
  file.metadata.erase("minivit.model.pos_embed");
  file.metadata.erase("minivit.model.pool");
  std::vector<TensorRef> refs;
  for (const std::string& name : file.order)
    refs.push_back({name, file.tensors.at(name).shape, file.tensors.at(name).data.data()});
  write_safetensors(dir.str("old.safetensors"), refs, file.metadata);
  const Checkpoint old = load_checkpoint(dir.str("old.safetensors"));
  CHECK(old.config.model.pos_embed == PosEmbedKind::learned);
  CHECK(old.config.model.pool == PoolKind::cls);
  CHECK(std::vector<float>(old.model->weights.begin(), old.model->weights.end()) ==
        std::vector<float>(model.weights.begin(), model.weights.end()));
}

TEST_CASE("the resume state refuses a config of another form, naming the key",
          "[checkpoint][forms][errors]") {
  const Config config = tiny_config_of_form(PosEmbedKind::sincos2d);
  ViT model(config.model);
  model.init(23);
  Optimizer optimizer(config.optim, model.num_params);
  TempDir dir("resume_forms");
  const std::string path = dir.str("resume.safetensors");
  save_resume_state(path, model, optimizer, config, {});
  // Same shapes, another form: the table would start to train.
  const Config learned = tiny_config_of_form(PosEmbedKind::learned);
  ViT other(learned.model);
  Optimizer other_optimizer(learned.optim, other.num_params);
  REQUIRE_THROWS_WITH(load_resume_state(path, other, other_optimizer),
                      Contains("resume.safetensors: the resume state was written for "
                               "model.pos_embed = \"sincos2d\", but the config asks for \"learned\""));
  // Another pooling: refused by name before any tensor is compared.
  const Config mean = tiny_config_of_form(PosEmbedKind::sincos2d, PoolKind::mean);
  ViT mean_model(mean.model);
  Optimizer mean_optimizer(mean.optim, mean_model.num_params);
  REQUIRE_THROWS_WITH(load_resume_state(path, mean_model, mean_optimizer),
                      Contains("written for model.pool = \"cls\", but the config asks for \"mean\""));
  // Another attention form, with the same tensors or not: refused by name too.
  for (AttentionForm form : {AttentionForm::dot, AttentionForm::cosine, AttentionForm::lsa}) {
    Config other_form = config;
    other_form.model.attention = form;
    ViT form_model(other_form.model);
    Optimizer form_optimizer(other_form.optim, form_model.num_params);
    REQUIRE_THROWS_WITH(load_resume_state(path, form_model, form_optimizer),
                        Contains("written for model.attention = \"scaled_dot\", but the config "
                                 "asks for \""));
  }
  ViT same(config.model);
  Optimizer same_optimizer(config.optim, same.num_params);
  CHECK_NOTHROW(load_resume_state(path, same, same_optimizer));
}
