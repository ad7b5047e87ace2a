// `troupe serve` config files (a topology plus a "server" section), and the
// chat prompt's template choice and BOS guard.
#include "net/server_config.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "net/chat_prompt.hpp"
#include "tests/net/fake_backend.hpp"

namespace troupe::net {
namespace {

TEST(ServeConfig, ShippedFileParses) {
  const ServeConfig c = load_serve_config(std::string(TROUPE_FIXTURES_DIR) + "/../../configs/server.json");
  EXPECT_EQ(c.server.listen.host, "127.0.0.1");
  EXPECT_EQ(c.server.listen.port, 8080);
  EXPECT_EQ(c.server.core.limits.max_body_bytes, 1048576u);
  EXPECT_EQ(c.server.core.admission.max_queue, 64);
  EXPECT_EQ(c.pipeline.scheduler.max_batch_size, 32);  // the topology part
  ASSERT_EQ(c.pipeline.stages.size(), 1u);
}

TEST(ServeConfig, TopologyOnlyFilesStillWork) {
  const ServeConfig c = parse_serve_config(R"({"kv": {"blocks": 8}})", "t.json");
  EXPECT_EQ(c.pipeline.n_kv_blocks, 8);
  EXPECT_EQ(c.server.listen.port, ServerOptions{}.port);
}

TEST(ServeConfig, ServerSectionAndRelativePaths) {
  const ServeConfig c = parse_serve_config(
      R"({
        // comments are allowed, as in the topology files
        "model": "m.gguf",
        "server": {"port": 0, "api_key": "k", "ws_max_message_bytes": 100, "max_tokens": 7,
                   "chat_template_file": "t.jinja", "resume_fraction": 0.5}
      })",
      "c.json", "/etc/troupe");
  EXPECT_EQ(c.pipeline.model_path, "/etc/troupe/m.gguf");
  EXPECT_EQ(c.server.chat_template_file, "/etc/troupe/t.jinja");
  EXPECT_EQ(c.server.listen.port, 0);
  EXPECT_EQ(c.server.core.api_key, "k");
  EXPECT_EQ(c.server.core.limits.ws_max_message_bytes, 100u);
  EXPECT_EQ(c.server.core.limits.request.max_tokens, 7);
  EXPECT_DOUBLE_EQ(c.server.core.admission.resume_fraction, 0.5);
}

TEST(ServeConfig, ErrorsNameTheKey) {
  auto message = [](const char* text) {
    try {
      parse_serve_config(text, "c.json");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::bad_format);
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message(R"({"server": {"prot": 1}})").find("server.prot"), std::string::npos);
  EXPECT_NE(message(R"({"server": {"port": "80"}})").find("server.port"), std::string::npos);
  EXPECT_NE(message(R"({"server": {"port": 70000}})").find("server.port"), std::string::npos);
  EXPECT_NE(message(R"({"server": []})").find("server"), std::string::npos);
  EXPECT_NE(message(R"({"kv": {"blokcs": 1}})").find("blokcs"), std::string::npos);  // the topology's own check
  EXPECT_NE(message("{oops").find("c.json"), std::string::npos);
  EXPECT_THROW(load_serve_config("/nonexistent/troupe.json"), Error);
}

TEST(ChatPrompt, BuiltinTemplateForModelsWithoutOne) {
  const ModelInfo info{.id = "m", .bos_text = "<s>", .eos_text = "</s>"};
  const ChatPrompter p("", info);
  EXPECT_EQ(p.origin(), "builtin");
  EXPECT_EQ(p.render({{.role = "system", .content = "Be kind."},
                      {.role = "user", .content = "Hi"},
                      {.role = "assistant", .content = "Hello"},
                      {.role = "user", .content = "Bye"}}),
            "Be kind.\n\nUser: Hi\nAssistant: Hello\nUser: Bye\nAssistant:");
}

TEST(ChatPrompt, TemplatesThatWriteBosGetNoSecondOne) {
  const test::FakeBackend backend;
  const Tokenizer& tok = backend.tokenizer();
  const ModelInfo info{.id = "m", .bos_text = "<s>", .eos_text = "</s>"};
  const ChatPrompter writes_bos("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}", info);
  const ChatPrompter plain("{% for m in messages %}{{ m['content'] }}{% endfor %}", info);
  EXPECT_EQ(writes_bos.origin(), "server");
  const std::vector<ChatMessage> msgs{{.role = "user", .content = "Once upon a time"}};
  const std::vector<int32_t> a = writes_bos.encode(tok, msgs);
  const std::vector<int32_t> b = plain.encode(tok, msgs);
  ASSERT_GE(a.size(), 2u);
  ASSERT_GE(b.size(), 2u);
  EXPECT_EQ(a[0], tok.bos());
  EXPECT_NE(a[1], tok.bos());
  EXPECT_EQ(b[0], tok.bos());
  EXPECT_NE(b[1], tok.bos());
}

TEST(ChatPrompt, ModelTemplateWinsOverBuiltinAndServerOverModel) {
  ModelInfo info{.id = "m", .chat_template = "{{ messages[0]['content'] }}!"};
  EXPECT_EQ(ChatPrompter("", info).origin(), "model");
  EXPECT_EQ(ChatPrompter("", info).render({{.role = "user", .content = "x"}}), "x!");
  EXPECT_EQ(ChatPrompter("{{ messages[0]['content'] }}?", info).render({{.role = "user", .content = "x"}}), "x?");
  EXPECT_THROW(ChatPrompter("{% for %}", info), Error);
}

}  // namespace
}  // namespace troupe::net
