#include "net/image_input.hpp"

#include "core/base64.hpp"
#include "core/error.hpp"
#include "net/api_error.hpp"

namespace troupe::net {

std::string base64_image(std::string_view data, const std::string& param) {
  std::string bytes;
  try {
    bytes = base64_decode(data);
  } catch (const Error& e) {
    throw invalid_field(param, "'" + param + "' holds no image: " + e.what());
  }
  if (bytes.empty()) throw invalid_field(param, "'" + param + "' holds no image: it is empty");
  return bytes;
}

std::string data_url_image(std::string_view url, const std::string& param) {
  const size_t comma = url.find(',');
  if (!url.starts_with("data:") || comma == std::string_view::npos) {
    throw invalid_field(param,
                        "'" + param +
                            "' must be a data: URL (data:image/png;base64,...): the server does not fetch "
                            "images",
                        "unsupported_value");
  }
  const std::string_view head = url.substr(5, comma - 5);
  if (!head.starts_with("image/") || !head.ends_with(";base64")) {
    throw invalid_field(param, "'" + param + "' must be a base64 image (data:image/...;base64,...), got data:" +
                                   std::string(head.substr(0, 64)));
  }
  return base64_image(url.substr(comma + 1), param);
}

}  // namespace troupe::net
