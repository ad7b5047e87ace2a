// The function-calling fields of a chat request (OpenAI's "tools",
// "tool_choice", "parallel_tool_calls"), checked: every tool a function
// with a unique name, a named choice one of them, a forcing choice not
// beside another output constraint.
#pragma once

#include <boost/json/object.hpp>

#include "net/request_parser.hpp"

namespace troupe::net {

// Reads the fields into r.chat.tools_json and r.tool_choice; call after
// the response format was read. Throws ApiError (400, naming the field).
void read_tools(const boost::json::object& o, ParsedRequest& r);

}  // namespace troupe::net
