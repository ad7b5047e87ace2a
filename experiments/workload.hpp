// Workloads for latency experiments: how requests arrive (Poisson rate,
// fixed concurrency or a recorded trace), how long their prompts and outputs
// are, how many share a prefix, which priority they carry. A spec comes from
// a JSON file (configs/workloads/, format in configs/workloads/README.md);
// plan_workload() turns it into the exact list of requests a run submits,
// the same list for the same seed on every machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/scheduler_policy.hpp"

namespace troupe {

class Tokenizer;

// A length drawn per request: fixed, uniform in [min, max], normal or
// log-normal (mean/stddev of the length itself) clamped to [min, max].
struct LengthDist {
  enum class Kind : uint8_t { fixed, uniform, normal, lognormal };
  Kind kind = Kind::fixed;
  double value = 0;   // fixed
  double mean = 0;    // normal, lognormal
  double stddev = 0;  // normal, lognormal
  int32_t min = 1;    // uniform, and the clamp of every kind
  int32_t max = 1;
};

struct ArrivalSpec {
  enum class Kind : uint8_t { poisson, concurrency, trace };
  Kind kind = Kind::poisson;
  double rate = 1.0;        // poisson: requests per second
  int32_t clients = 1;      // concurrency: requests in flight at once (closed loop)
  std::string trace_path;   // trace: JSONL, one request a line (see README)
};

struct WorkloadSpec {
  std::string name;
  uint64_t seed = 0;
  int32_t n_requests = 16;  // trace: at most this many lines (0: all)
  ArrivalSpec arrival;
  LengthDist prompt_tokens{.kind = LengthDist::Kind::fixed, .value = 32};
  LengthDist output_tokens{.kind = LengthDist::Kind::fixed, .value = 32};
  // Text prompts: a JSONL file with a "prompt" string a line; when set,
  // prompts are drawn from it (uniformly, with the seed) instead of random
  // token ids, and prompt_tokens only caps their length.
  std::string prompts_path;
  // Shared prefixes: this fraction of requests start with one of
  // `prefix_groups` fixed prefixes of `prefix_tokens` tokens.
  double shared_prefix_fraction = 0;
  int32_t prefix_tokens = 0;
  int32_t prefix_groups = 1;
  double batch_fraction = 0;  // share of requests with Priority::batch
  bool ignore_eos = true;     // generate exactly the drawn output length
};

// One request of a run, ready to submit.
struct PlannedRequest {
  int32_t index = 0;           // position in the plan
  double arrival_s = 0;        // seconds after the run starts (poisson, trace); 0 for concurrency
  std::vector<int32_t> prompt; // token ids
  int32_t max_new_tokens = 1;
  Priority priority = Priority::interactive;
  int32_t prefix_group = -1;   // the shared prefix it starts with, -1: none
};

// One line of a trace file. A line gives its prompt as a length (random
// tokens, like the spec's) or as text; what it leaves out is drawn from the
// spec (output length, priority), so a trace may record arrivals only.
struct TraceEntry {
  double t = 0;                // seconds since the start, non-decreasing down the file
  int32_t prompt_tokens = -1;  // -1: the text below, or drawn when that is empty too
  std::string prompt;          // text, encoded when the plan is made
  int32_t output_tokens = -1;  // -1: drawn from the spec's output_tokens
  std::optional<Priority> priority;  // none: drawn from the spec's batch share
};

// Trace JSONL -> entries; a prompt dataset JSONL ({"prompt": "text"} a line,
// other keys ignored) -> its texts. Blank lines are skipped. Throw Error(io)
// for a file that cannot be read and Error(bad_format) naming the file, the
// line and the key at fault.
std::vector<TraceEntry> read_workload_trace(const std::string& path);
std::vector<std::string> read_prompt_dataset(const std::string& path);

// JSON text -> spec; relative paths (trace, prompts) are resolved against
// `base_dir`. Unknown keys and wrong types throw Error(bad_format) naming the key.
WorkloadSpec parse_workload(std::string_view json, const std::string& origin, const std::string& base_dir);
WorkloadSpec load_workload(const std::string& path);

// Deterministic for a spec (seed included) and a tokenizer: random prompt
// tokens are drawn from the tokenizer's ordinary (non-control) tokens.
// Prompts never exceed `max_prompt_tokens` (longer ones are cut). Reads the
// trace and dataset files the spec names (their errors as above); throws
// Error(invalid_argument) for a spec it cannot plan, such as a shared prefix
// that leaves no room under the cap.
std::vector<PlannedRequest> plan_workload(const WorkloadSpec& spec, const Tokenizer& tokenizer,
                                          int32_t max_prompt_tokens);

}  // namespace troupe
