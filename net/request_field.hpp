// One field of a request body, shared by the readers of the API's fields
// (request_parser.cpp, request_tools.cpp): absent and null are the same
// for optional fields, as in OpenAI's API.
#pragma once

#include <boost/json/object.hpp>

#include <string_view>

namespace troupe::net {

inline const boost::json::value* field(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  return (v == nullptr || v->is_null()) ? nullptr : v;
}

}  // namespace troupe::net
