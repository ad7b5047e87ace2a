// Splits a Server-Sent Events byte stream into the data of each event,
// however the bytes were cut into reads. The rules of the SSE spec that a
// client of an OpenAI-style stream needs: an event ends at a blank line;
// its "data:" lines are joined with "\n"; comments (":...") and other
// fields are skipped; LF, CRLF and CR all end a line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe::net {

class SseSplitter {
 public:
  // The data of every event these bytes complete, in order.
  std::vector<std::string> feed(std::string_view bytes);

 private:
  void end_line(std::vector<std::string>& out);

  std::string line_;        // the line being read
  std::string data_;        // the event's data lines so far, each followed by "\n"
  bool has_data_ = false;   // an event with an empty data line is still an event
  bool after_cr_ = false;   // a "\n" right after "\r" ends nothing more
};

}  // namespace troupe::net
