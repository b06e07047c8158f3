// Every attention form as a user switches it on: `train --set model.attention=FORM` trains
// and checkpoints, the checkpoint carries the form and its own tensors, `info` shows the
// form, `eval` reproduces the trainer's accuracy, and `attention` draws its maps.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "minivit/formats/safetensors.h"
#include "test_util.h"

using namespace minivit_test;
using Catch::Matchers::Contains;

TEST_CASE("every attention form trains, checkpoints, evaluates and is inspected from the CLI",
          "[cli][forms]") {
  TempDir dir("forms");
  const std::string data = dir.str("data");
  write_tiny_idx_dataset(data, 160, 48, 8, 4);
  write_text(dir.str("tiny.toml"), tiny_config_toml(data, dir.str("unused")));
  for (const char* form : {"dot", "additive", "cosine", "lsa"}) {
    INFO(form);
    const std::string out = dir.str(form);
    const RunResult train = run_minivit("train --config " + dir.str("tiny.toml") +
                                        " --set model.attention=" + form +
                                        " --set train.max_steps=12 --out " + out);
    REQUIRE(train.exit_code == 0);
    const std::string last = out + "/last.safetensors";
    const minivit::SafetensorsFile file = minivit::read_safetensors(last);
    CHECK(file.metadata.at("minivit.model.attention") == "\"" + std::string(form) + "\"");
    CHECK(file.tensors.count("blocks.0.attn.additive_v") == (std::string(form) == "additive"));
    CHECK(file.tensors.count("blocks.0.attn.logit_scale") ==
          (std::string(form) == "cosine" || std::string(form) == "lsa"));

    const RunResult info = run_minivit("info " + last);
    REQUIRE(info.exit_code == 0);
    CHECK_THAT(info.out, Contains("attention = \"" + std::string(form) + "\"") &&
                             Contains("; attention " + std::string(form) + ", pos_embed"));

    const RunResult eval = run_minivit("eval --checkpoint " + last);
    REQUIRE(eval.exit_code == 0);
    const std::string top1 = train.out.substr(train.out.find("top-1 ") + 6, 6);
    CHECK_THAT(eval.out, Contains("top-1 " + top1));

    const RunResult maps =
        run_minivit("attention --checkpoint " + last + " --index 1 --out " + out + "/maps");
    REQUIRE(maps.exit_code == 0);
    CHECK(std::filesystem::exists(out + "/maps/attention.npy"));
    CHECK(std::filesystem::exists(out + "/maps/index.html"));
  }
  const RunResult bad = run_minivit("train --config " + dir.str("tiny.toml") +
                                    " --set model.attention=bahdanau --out " + dir.str("bad"));
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Contains("model.attention") && Contains("\"additive\"") &&
                          Contains("\"bahdanau\""));
}
