// {"count", "max_model_len", "tokens"[, "token_strs"]} and {"prompt"}, as
// vLLM's server answers them.
#include "net/tokenize_reply.hpp"

#include <boost/json.hpp>

#include "net/api_error.hpp"
#include "net/openai_response.hpp"
#include "net/routes.hpp"

namespace troupe::net {
namespace {

class TokenizeReply : public AsyncReply {
 public:
  TokenizeReply(ServerCore& core, TokenizeRequest request) : core_(core), request_(std::move(request)) {}

  void start(std::shared_ptr<ReplyWriter> writer) override {
    const bool detokenize = request_.detokenize;
    const bool strs = request_.return_token_strs;
    ServerCore* core = &core_;
    try {
      core_.backend().tokenize(std::move(request_.prompt), detokenize,
                               [writer, detokenize, strs, core](TokenizeAnswer a) {
                                 if (!a.error.empty()) {
                                   writer->send(core->error_reply(api_error_from(a.error_code, a.error, a.error_param)));
                                   return;
                                 }
                                 writer->send(HttpReply{.status = 200,
                                                        .content_type = "application/json",
                                                        .body = detokenize ? detokenize_body(a) : tokenize_body(a, strs)});
                               });
    } catch (const Error& e) {
      writer->send(core_.error_reply(api_error_from(e.code(), e.what())));
    }
  }

  void cancel() override {}  // a tokenize is short: it finishes and is dropped

 private:
  static std::string tokenize_body(const TokenizeAnswer& a, bool strs) {
    boost::json::object o;
    o["count"] = a.tokens.size();
    o["max_model_len"] = a.max_model_len;
    boost::json::array ids;
    for (const int32_t t : a.tokens) ids.push_back(t);
    o["tokens"] = std::move(ids);
    if (strs) {
      boost::json::array pieces;
      for (const std::string& p : a.pieces) pieces.push_back(boost::json::string(token_alternative(p, 0.0f).token));
      o["token_strs"] = std::move(pieces);
    } else {
      o["token_strs"] = nullptr;
    }
    return boost::json::serialize(o);
  }

  static std::string detokenize_body(const TokenizeAnswer& a) {
    boost::json::object o;
    o["prompt"] = token_alternative(a.text, 0.0f).token;  // invalid UTF-8 repaired, as in every JSON reply
    return boost::json::serialize(o);
  }

  ServerCore& core_;
  TokenizeRequest request_;
};

}  // namespace

std::shared_ptr<AsyncReply> make_tokenize_reply(ServerCore& core, TokenizeRequest request) {
  return std::make_shared<TokenizeReply>(core, std::move(request));
}

}  // namespace troupe::net
