// What a load run measured of one request, whichever way it ran (in-process
// through a Pipeline, or against a server over HTTP): all times are seconds
// since the run started, on the steady clock of the process that measured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

struct RequestRecord {
  int32_t index = 0;             // PlannedRequest::index
  double scheduled_s = 0;        // when the plan said to send it
  double sent_s = 0;             // when it was submitted / the HTTP request written
  double first_token_s = -1;     // first token received; -1: none
  double end_s = 0;              // final event / end of the stream
  double queue_s = -1;           // submit -> first scheduled, when the engine says (-1: unknown)
  std::vector<double> token_s;   // arrival time of every token (SSE chunks: of every chunk)
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;     // as the engine counted
  bool ok = false;               // ended normally (stop or length)
  std::string error;             // when !ok
};

}  // namespace troupe
