// Images as the client APIs send them, to the bytes the engine decodes: a
// data: URL (OpenAI's image_url, the Responses API's input_image) or bare
// base64 (Anthropic's base64 source, Ollama's images). The server fetches
// nothing on a client's behalf, so an http(s) URL is refused by name.
#pragma once

#include <string>
#include <string_view>

namespace troupe::net {

// data:image/<type>;base64,<data> -> the image's bytes. Throws ApiError
// (400) naming `param` for any other URL or for data that is not base64.
std::string data_url_image(std::string_view url, const std::string& param);

// Base64 text -> the image's bytes. Throws ApiError (400) naming `param`.
std::string base64_image(std::string_view data, const std::string& param);

}  // namespace troupe::net
