// Byte-at-a-time, since an event (and even "\r\n") may be cut anywhere by a
// read; the events of a token stream are a few hundred bytes each.
#include "net/sse_splitter.hpp"

namespace troupe::net {

std::vector<std::string> SseSplitter::feed(std::string_view bytes) {
  std::vector<std::string> out;
  for (const char c : bytes) {
    if (c == '\n' && after_cr_) {
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      end_line(out);
    } else {
      line_ += c;
    }
  }
  return out;
}

void SseSplitter::end_line(std::vector<std::string>& out) {
  if (line_.empty()) {
    if (has_data_) {
      data_.pop_back();  // the "\n" after the last data line
      out.push_back(std::move(data_));
    }
    data_.clear();
    has_data_ = false;
    return;
  }
  const size_t colon = line_.find(':');
  const std::string_view field = std::string_view(line_).substr(0, colon);
  if (field == "data") {
    std::string_view value;
    if (colon != std::string::npos) {
      value = std::string_view(line_).substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    data_.append(value);
    data_ += '\n';
    has_data_ = true;
  }
  line_.clear();
}

}  // namespace troupe::net
