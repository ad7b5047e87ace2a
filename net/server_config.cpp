// Splits a serve config into its "server" section (read here), the
// topology (handed, re-serialised, to parse_pipeline_config so that its
// rules and messages stay the topology's own) and its replicas, if any.
#include "net/server_config.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "actors/pipeline_config.hpp"
#include "actors/replica_config.hpp"
#include "core/error.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

class SectionReader {
 public:
  SectionReader(const json::object& o, std::string origin) : o_(o), origin_(std::move(origin)) {
    static constexpr const char* kKeys[] = {"host",
                                            "port",
                                            "io_threads",
                                            "idle_timeout_s",
                                            "write_timeout_s",
                                            "header_timeout_s",
                                            "max_header_bytes",
                                            "max_connections",
                                            "ws_ping_timeout_s",
                                            "socket_send_buffer",
                                            "api_key",
                                            "model_name",
                                            "chat_template_file",
                                            "max_body_bytes",
                                            "ws_max_message_bytes",
                                            "send_queue_bytes",
                                            "ws_max_requests",
                                            "max_tokens",
                                            "max_n",
                                            "max_queue",
                                            "degraded_max_tokens",
                                            "degrade_fraction",
                                            "kv_degrade_waiting",
                                            "kv_refuse_waiting",
                                            "resume_fraction",
                                            "max_queue_seconds",
                                            "replica_affinity_slack"};
    for (const auto& kv : o_) {
      bool known = false;
      for (const char* k : kKeys) known = known || kv.key() == k;
      if (!known) fail(std::string(kv.key()), "unknown key");
    }
  }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(Errc::bad_format, origin_ + ": server." + key + ": " + what);
  }

  void str(const char* key, std::string& out) const {
    const json::value* v = o_.if_contains(key);
    if (v == nullptr) return;
    if (!v->is_string()) fail(key, "must be a string");
    out.assign(v->as_string().data(), v->as_string().size());
  }

  template <class T>
  void integer(const char* key, T& out, int64_t lo, int64_t hi) const {
    const json::value* v = o_.if_contains(key);
    if (v == nullptr) return;
    if (!v->is_int64()) fail(key, "must be an integer");
    const int64_t x = v->as_int64();
    if (x < lo || x > hi) fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = static_cast<T>(x);
  }

  void number(const char* key, double& out, double lo, double hi) const {
    const json::value* v = o_.if_contains(key);
    if (v == nullptr) return;
    if (!v->is_number()) fail(key, "must be a number");
    const double x = v->to_number<double>();
    if (!(x >= lo && x <= hi)) fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = x;
  }

 private:
  const json::object& o_;
  std::string origin_;
};

void read_server(const json::object& o, const std::string& origin, ServerSettings& s) {
  const SectionReader r(o, origin);
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
  r.str("host", s.listen.host);
  r.integer("port", s.listen.port, 0, 65535);
  r.integer("io_threads", s.listen.io_threads, 1, 256);
  r.integer("idle_timeout_s", s.listen.idle_timeout_s, 1, kBig);
  r.integer("write_timeout_s", s.listen.write_timeout_s, 1, kBig);
  r.integer("header_timeout_s", s.listen.header_timeout_s, 1, kBig);
  r.integer("max_header_bytes", s.listen.max_header_bytes, 1024, 1 << 20);
  r.integer("max_connections", s.listen.max_connections, 1, 1 << 20);
  r.integer("ws_ping_timeout_s", s.listen.ws_ping_timeout_s, 1, kBig);
  r.integer("socket_send_buffer", s.listen.socket_send_buffer, 0, kBig);
  r.str("api_key", s.core.api_key);
  r.str("model_name", s.model_name);
  r.str("chat_template_file", s.chat_template_file);
  ServerLimits& l = s.core.limits;
  r.integer("max_body_bytes", l.max_body_bytes, 1, int64_t{1} << 40);
  r.integer("ws_max_message_bytes", l.ws_max_message_bytes, 1, int64_t{1} << 40);
  r.integer("send_queue_bytes", l.send_queue_bytes, 1, int64_t{1} << 40);
  r.integer("ws_max_requests", l.ws_max_requests, 1, kBig);
  r.integer("max_tokens", l.request.max_tokens, 1, kBig);
  r.integer("max_n", l.request.max_n, 1, 128);
  AdmissionOptions& a = s.core.admission;
  r.integer("max_queue", a.max_queue, 0, kBig);
  r.integer("degraded_max_tokens", a.degraded_max_tokens, 0, kBig);
  r.number("degrade_fraction", a.degrade_fraction, 0.0, 1.0);
  r.integer("kv_degrade_waiting", a.kv_degrade_waiting, 0, kBig);
  r.integer("kv_refuse_waiting", a.kv_refuse_waiting, 0, kBig);
  r.number("resume_fraction", a.resume_fraction, 0.01, 1.0);
  r.number("max_queue_seconds", a.max_queue_seconds, 0.0, 86400.0);
  r.integer("replica_affinity_slack", s.replica_routing.affinity_slack, 0, kBig);
}

std::string resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || base_dir.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

}  // namespace

ServeConfig parse_serve_config(std::string_view text, const std::string& origin, const std::string& base_dir) {
  json::parse_options opt;
  opt.allow_comments = true;
  boost::system::error_code ec;
  json::value root = json::parse(json::string_view(text.data(), text.size()), ec, {}, opt);
  if (ec) throw Error(Errc::bad_format, origin + ": not valid JSON: " + ec.message());
  if (!root.is_object()) throw Error(Errc::bad_format, origin + ": must be a JSON object");
  ServeConfig c;
  json::object& obj = root.as_object();
  if (const json::value* server = obj.if_contains("server")) {
    if (!server->is_object()) throw Error(Errc::bad_format, origin + ": server: must be an object");
    read_server(server->as_object(), origin, c.server);
    obj.erase("server");
  }
  // The top level first, so that its own mistakes are named as such
  // rather than as those of the replicas that inherit it.
  const std::string with_replicas = json::serialize(obj);
  obj.erase("replicas");
  c.pipeline = parse_pipeline_config(json::serialize(obj), origin);
  c.pipeline.model_path = resolve(c.pipeline.model_path, base_dir);
  c.pipeline.mmproj = resolve(c.pipeline.mmproj, base_dir);
  for (LoraAdapterSpec& a : c.pipeline.load.lora) a.path = resolve(a.path, base_dir);
  c.replicas = parse_replicas(with_replicas, origin);
  for (PipelineConfig& r : c.replicas) {
    r.model_path = c.pipeline.model_path;
    r.mmproj = c.pipeline.mmproj;
    r.load = c.pipeline.load;
  }
  c.server.chat_template_file = resolve(c.server.chat_template_file, base_dir);
  return c;
}

ServeConfig load_serve_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, path + ": cannot open the config file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_serve_config(text.str(), path, std::filesystem::path(path).parent_path().string());
}

}  // namespace troupe::net
