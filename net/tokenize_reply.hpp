// The asynchronous replies of POST /tokenize and /detokenize: the engine's
// tokenizer actor answers, so these endpoints see exactly the ids a
// generation request with the same prompt would get.
#pragma once

#include <memory>

#include "net/http_types.hpp"
#include "net/request_parser.hpp"

namespace troupe::net {

class ServerCore;

std::shared_ptr<AsyncReply> make_tokenize_reply(ServerCore& core, TokenizeRequest request);

}  // namespace troupe::net
