// The chat page's files (net/static/), compiled into the binary by
// net/embed_static.cmake so `troupe serve` needs no files beside it.
#pragma once

#include <string_view>

namespace troupe::net {

struct StaticAsset {
  std::string_view path;  // "/index.html", "/app.js", ...
  std::string_view content_type;
  std::string_view body;
};

// nullptr when no file has that path ("/" is "/index.html").
const StaticAsset* find_static_asset(std::string_view path);

}  // namespace troupe::net
