// Pieces of the JSON replies the routes write by hand (/v1/embeddings,
// /v1/rerank, /v1/score, /v1/classify, /ready, ...): numbers in their
// shortest exact form, quoted strings, OpenAI's usage object, the reply.
#pragma once

#include <cstdint>
#include <string>

#include "net/http_types.hpp"

namespace troupe::net {

// Appends x in the shortest form that reads back to the same value.
void append_number(std::string& out, float x);
void append_number(std::string& out, double x);
// s as a JSON string literal, quotes included.
std::string json_quoted(const std::string& s);
// "usage":{"prompt_tokens":n,"total_tokens":n} (nothing is generated).
std::string usage_json(int64_t prompt_tokens);
// A reply of `body` as application/json.
HttpReply json_reply(int status, std::string body);

}  // namespace troupe::net
