// `troupe serve` config files (a topology plus a "server" section), and the
// chat prompt's template choice and BOS guard.
#include "net/server_config.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tests/net/fake_engine.hpp"

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
        "lora": ["a.gguf"],
        "server": {"port": 0, "api_key": "k", "ws_max_message_bytes": 100, "max_tokens": 7,
                   "chat_template_file": "t.jinja", "resume_fraction": 0.5}
      })",
      "c.json", "/etc/troupe");
  EXPECT_EQ(c.pipeline.model_path, "/etc/troupe/m.gguf");
  ASSERT_EQ(c.pipeline.load.lora.size(), 1u);
  EXPECT_EQ(c.pipeline.load.lora[0].path, "/etc/troupe/a.gguf");
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

}  // namespace
}  // namespace troupe::net
