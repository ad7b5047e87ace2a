// Remote stages refused before the first step, with real `troupe stage`
// processes on 127.0.0.1: a worker that quantized otherwise, lacks the
// head's LoRA adapter, holds another model or layer range, wants a secret,
// speaks another protocol version or TLS, or is not there, each refused
// with its sentence; and the chains that quantize or adapt as the head does
// give one process's tokens.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/stage_handshake.hpp"
#include "pipeline_test_util.hpp"
#include "remote_stage_util.hpp"
#include "stage_process.hpp"

namespace troupe {
namespace {

using namespace std::chrono_literals;
using namespace test;  // NOLINT: the remote-stage helpers

// -- mismatches, refused before the first step ---------------------------------------

// `--quantize` on the worker and the head's "quantize": both hold the same
// converted weights, so the chain gives the tokens of one process that
// quantized the same way; a worker that did not quantize as the head did is
// refused, told which flag to give.
TEST(RemoteStages, QuantizedChainMatchesOneQuantizedProcess) {
  const std::shared_ptr<const Model> model = Model::load(kStories, {.quantize = parse_quant_scheme("q4_k_m")});
  const std::vector<std::vector<int32_t>> prompts = case_prompts(4);
  const std::vector<std::vector<int32_t>> want = one_process_ids(model, prompts);
  StageProcess w;
  ASSERT_TRUE(w.start(stories_worker("2:5", {"--quantize", "Q4_K_M"})));
  expect_chain_gives(model, w, prompts, want);
}

TEST(RemoteStages, WorkerQuantizedOtherwiseIsRefused) {
  StageProcess w;
  ASSERT_TRUE(w.start(stories_worker("2:5", {"--quantize", "q6_k"})));
  const std::string e = start_error(stories_head({{.first_layer = 0, .last_layer = 2, .threads = 1},
                                                  {.first_layer = 2, .last_layer = -1, .remote = w.address()}}));
  EXPECT_NE(e.find("model differs: the head has stories260K"), std::string::npos) << e;
  EXPECT_NE(e.find("give the worker the head's --quantize"), std::string::npos) << e;
  Probe().expect_idle(w.port());
}

// A LoRA adapter on the worker (`--lora`) and on the head: the chain gives
// the tokens of one process with the adapter. A worker without it is
// refused (the adapter is part of the model's identity), told to give it.
TEST(RemoteStages, AdaptedChainMatchesOneAdaptedProcess) {
  const std::string adapter = std::string(TROUPE_FIXTURES_DIR) + "/lora/stories260k.gguf";
  ModelLoadOptions with_adapter;
  with_adapter.lora = {{.path = adapter}};
  const std::shared_ptr<const Model> model = Model::load(kStories, with_adapter);
  const std::vector<std::vector<int32_t>> prompts = case_prompts(3);
  const std::vector<std::vector<int32_t>> want = one_process_ids(model, prompts);
  EXPECT_NE(one_process_ids(Model::load(kStories), prompts)[0], want[0]) << "the adapter changed nothing";
  StageProcess w;
  ASSERT_TRUE(w.start(stories_worker("2:5", {"--lora", adapter})));
  expect_chain_gives(model, w, prompts, want);

  StageProcess bare;
  ASSERT_TRUE(bare.start(stories_worker("2:5")));
  PipelineConfig refused = stories_head({{.first_layer = 0, .last_layer = 2, .threads = 1},
                                         {.first_layer = 2, .last_layer = -1, .remote = bare.address()}});
  refused.model = model;
  const std::string e = start_error(refused);
  EXPECT_NE(e.find("model differs"), std::string::npos) << e;
  EXPECT_NE(e.find("--lora"), std::string::npos) << e;
  Probe().expect_idle(bare.port());
}

TEST(RemoteStages, WrongModelIsRefused) {
  const std::string path = smollm2_gguf();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found (scripts/setup fetches it)";
  StageProcess w;
  ASSERT_TRUE(w.start({"-m", path, "--layers", "2:5", "-t", "1", "--kv-blocks", "512"}));
  const std::string e = start_error(stories_head({{.first_layer = 0, .last_layer = 2, .threads = 1},
                                                  {.first_layer = 2, .last_layer = -1, .remote = w.address()}}));
  EXPECT_EQ(e.rfind("invalid_argument: the stage worker at " + w.address() +
                        " refused this head: model differs: the "
                        "head has stories260K",
                    0),
            0u)
      << e;
  EXPECT_NE(e.find("the worker has SmolLM2-135M-Instruct.Q4_1"), std::string::npos) << e;
  Probe().expect_idle(w.port());
}

TEST(RemoteStages, WrongLayerRangeIsRefused) {
  StageProcess w;
  ASSERT_TRUE(w.start(stories_worker("3:5")));
  const std::string e = start_error(stories_head({{.first_layer = 0, .last_layer = 2, .threads = 1},
                                                  {.first_layer = 2, .last_layer = -1, .remote = w.address()}}));
  EXPECT_NE(e.find("refused this head: layer range differs: the head expects layers [2, 5) of this stage, the worker "
                   "holds [3, 5)"),
            std::string::npos)
      << e;
}

TEST(RemoteStages, SecretIsRequiredAndChecked) {
  StageProcess w;
  ASSERT_TRUE(w.start(stories_worker("2:5", {"--secret", "open sesame"})));
  PipelineConfig cfg = stories_head(
      {{.first_layer = 0, .last_layer = 2, .threads = 1}, {.first_layer = 2, .last_layer = -1, .remote = w.address()}});
  EXPECT_NE(start_error(cfg).find("refused this head: wrong or missing secret"), std::string::npos);
  cfg.remote.secret = "open sesam";
  EXPECT_NE(start_error(cfg).find("refused this head: wrong or missing secret"), std::string::npos);
  cfg.remote.secret = "open sesame";
  auto p = Pipeline::start(cfg);
  const test::Case c = test::make_cases(1).front();
  auto f = p->generate(c.prompt, test::greedy(c.max_new_tokens));
  EXPECT_EQ(test::ids_of(test::wait_for(f, 30s)), c.expected);
}

TEST(RemoteStages, ProtocolVersionMismatchIsRefused) {
  StageProcess w;
  ASSERT_TRUE(w.start(stories_worker("2:5", {"--wire-version", "99"})));
  const std::string e = start_error(stories_head({{.first_layer = 0, .last_layer = 2, .threads = 1},
                                                  {.first_layer = 2, .last_layer = -1, .remote = w.address()}}));
  EXPECT_NE(e.find("refused this head: protocol version differs: the head speaks Troupe stage protocol " +
                   std::to_string(kStageWireVersion) + ", the worker speaks 99"),
            std::string::npos)
      << e;
}

// A CA and one certificate for 127.0.0.1 made with the openssl tool, in a
// fresh folder; empty when the tool is missing.
std::string make_test_certificates() {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("troupe-tls-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  const std::string cmd = "cd '" + dir +
                          "' && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj "
                          "/CN=troupe-test-ca && openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr "
                          "-subj /CN=127.0.0.1 && openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key "
                          "-CAcreateserial -out node.pem -days 1";
  if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) return {};
  return dir;
}

TEST(RemoteStages, TlsLinkServesAndAPlainHeadIsRefused) {
#ifndef TROUPE_HAVE_CAF_OPENSSL
  GTEST_SKIP() << "this build has no CAF OpenSSL module";
#else
  const std::string dir = make_test_certificates();
  if (dir.empty()) GTEST_SKIP() << "the openssl tool is not available to make test certificates";
  StageProcess w;
  ASSERT_TRUE(w.start(stories_worker(
      "2:5", {"--tls-cert", dir + "/node.pem", "--tls-key", dir + "/node.key", "--tls-ca", dir + "/ca.pem"})));
  PipelineConfig cfg = stories_head(
      {{.first_layer = 0, .last_layer = 2, .threads = 1}, {.first_layer = 2, .last_layer = -1, .remote = w.address()}});
  // Without TLS the worker hangs up during the handshake.
  EXPECT_EQ(start_error(cfg).rfind("unavailable: cannot reach the stage worker at " + w.address(), 0), 0u);
  cfg.remote.tls_cert = dir + "/node.pem";
  cfg.remote.tls_key = dir + "/node.key";
  cfg.remote.tls_ca = dir + "/ca.pem";
  {
    auto p = Pipeline::start(cfg);
    const test::Case c = test::make_cases(1).front();
    auto f = p->generate(c.prompt, test::greedy(c.max_new_tokens));
    EXPECT_EQ(test::ids_of(test::wait_for(f, 30s)), c.expected);
    expect_head_idle(*p);
  }
  std::filesystem::remove_all(dir);
#endif
}

TEST(RemoteStages, NobodyListeningIsAnUnavailableStage) {
  StageProcess w;
  ASSERT_TRUE(w.start(stories_worker("2:5")));
  const std::string address = w.address();
  w.stop();
  const std::string e = start_error(stories_head(
      {{.first_layer = 0, .last_layer = 2, .threads = 1}, {.first_layer = 2, .last_layer = -1, .remote = address}}));
  EXPECT_EQ(e.rfind("unavailable: cannot reach the stage worker at " + address, 0), 0u) << e;
}

}  // namespace
}  // namespace troupe
