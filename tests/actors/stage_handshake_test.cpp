// The head/worker handshake decides fit in one place: the secret first, then
// the protocol version, model, layers, KV geometry and step limits, each
// refusal one sentence naming both sides.
#include "actors/stage_handshake.hpp"

#include <gtest/gtest.h>

namespace troupe {
namespace {

StageFacts worker() {
  return {.model_id = "00112233aabbccdd",
          .model_name = "stories260K",
          .first_layer = 2,
          .last_layer = 5,
          .kv_blocks = 512,
          .kv_block_size = 16,
          .max_tokens = 2048,
          .max_seqs = 64,
          .device = "cpu"};
}

StageFacts head() {
  StageFacts h = worker();
  h.max_tokens = 96;
  h.max_seqs = 16;
  return h;
}

TEST(StageHandshake, AcceptsAHeadThatFits) {
  EXPECT_EQ(check_hello(kStageWireVersion, hello_json(head(), ""), worker(), ""), "");
  EXPECT_EQ(check_hello(kStageWireVersion, hello_json(head(), "s"), worker(), "s"), "");
  // A secret the worker does not ask for is harmless.
  EXPECT_EQ(check_hello(kStageWireVersion, hello_json(head(), "extra"), worker(), ""), "");
}

TEST(StageHandshake, SecretIsCheckedBeforeAnythingElse) {
  StageFacts h = head();
  h.model_id = "ffffffffffffffff";
  const std::string v = check_hello(kStageWireVersion + 7, hello_json(h, "wrong"), worker(), "right");
  EXPECT_EQ(v, "wrong or missing secret (the worker requires --secret or TROUPE_STAGE_SECRET)");
  EXPECT_EQ(check_hello(kStageWireVersion, hello_json(head(), ""), worker(), "right"), v);
  EXPECT_EQ(check_hello(kStageWireVersion, hello_json(head(), "righ"), worker(), "right"), v);
}

TEST(StageHandshake, EachMismatchNamesBothSides) {
  EXPECT_EQ(check_hello(7, hello_json(head(), ""), worker(), "", 8),
            "protocol version differs: the head speaks Troupe stage protocol 7, the worker speaks 8");
  StageFacts h = head();
  h.model_id = "ffffffffffffffff";
  h.model_name = "SmolLM2";
  EXPECT_EQ(check_hello(kStageWireVersion, hello_json(h, ""), worker(), ""),
            "model differs: the head has SmolLM2 (id ffffffffffffffff), the worker has stories260K (id "
            "00112233aabbccdd)");
  h = head();
  h.model_id = "ffffffffffffffff";  // the same file, other weights: quantized (or LongRoPE factors chosen) otherwise
  EXPECT_EQ(check_hello(kStageWireVersion, hello_json(h, ""), worker(), ""),
            "model differs: the head has stories260K (id ffffffffffffffff), the worker has stories260K (id "
            "00112233aabbccdd); give the worker the head's --quantize and --lora (and --ctx)");
  h = head();
  h.first_layer = 3;
  EXPECT_EQ(check_hello(kStageWireVersion, hello_json(h, ""), worker(), ""),
            "layer range differs: the head expects layers [3, 5) of this stage, the worker holds [2, 5)");
  h = head();
  h.kv_blocks = 256;
  EXPECT_EQ(check_hello(kStageWireVersion, hello_json(h, ""), worker(), ""),
            "KV geometry differs: the head has 256 KV blocks of 16 tokens (f32), the worker 512 KV blocks of 16 "
            "tokens (f32)");
  h = head();
  h.max_tokens = 4096;
  EXPECT_EQ(check_hello(kStageWireVersion, hello_json(h, ""), worker(), ""),
            "step limits differ: the head sends up to 4096 tokens and 16 sequences a step, the worker holds 2048 "
            "and 64");
}

TEST(StageHandshake, GarbageIsRefusedNotThrown) {
  EXPECT_NE(check_hello(kStageWireVersion, "{not json", worker(), ""), "");
  EXPECT_NE(check_hello(kStageWireVersion, "{}", worker(), ""), "");
  EXPECT_NE(check_hello(kStageWireVersion, R"({"model_id": 5})", worker(), ""), "");
}

TEST(StageHandshake, FactsRoundTrip) {
  const StageFacts f = parse_facts(facts_json(worker()));
  EXPECT_EQ(f.model_id, worker().model_id);
  EXPECT_EQ(f.last_layer, 5);
  EXPECT_EQ(f.kv_blocks, 512);
  EXPECT_EQ(f.device, "cpu");
}

}  // namespace
}  // namespace troupe
