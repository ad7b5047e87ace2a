// Workload files -> WorkloadSpec, and the JSONL files they point to (traces,
// prompt datasets). Strict like the pipeline configs: an unknown key or a
// wrong type is an error naming the file and the key, never a silent default.
#include "experiments/workload.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>

#include "actors/json_reader.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

using nlohmann::json;

using Reader = JsonReader;

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string resolve(const std::string& file, const std::string& base_dir) {
  const std::filesystem::path p(file);
  if (base_dir.empty() || p.is_absolute()) return file;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

// A file named by the workload, resolved against the workload's folder.
std::string read_file_name(const Reader& r, const json& v, const std::string& where, const std::string& base_dir) {
  if (!v.is_string()) r.wrong_type(where, v, "a file name");
  if (v.get<std::string>().empty()) r.fail(where, "must not be empty");
  return resolve(v.get<std::string>(), base_dir);
}

void read_arrival(const Reader& r, const json& a, const std::string& base_dir, ArrivalSpec& out) {
  if (!a.is_object()) r.fail("arrival", "must be an object with a \"type\"");
  std::string type;
  const json& t = r.require(a, "type", "arrival");
  if (!t.is_string()) r.wrong_type("arrival.type", t, "a string");
  type = t.get<std::string>();
  if (type == "poisson") {
    r.only_keys(a, "arrival", {"type", "rate"});
    out.kind = ArrivalSpec::Kind::poisson;
    out.rate = r.number(r.require(a, "rate", "arrival"), "arrival.rate");
    if (out.rate <= 0) r.fail("arrival.rate", "must be > 0 requests per second (got " + num(out.rate) + ")");
  } else if (type == "concurrency") {
    r.only_keys(a, "arrival", {"type", "clients"});
    out.kind = ArrivalSpec::Kind::concurrency;
    out.clients = r.integer<int32_t>(r.require(a, "clients", "arrival"), "arrival.clients");
    if (out.clients < 1) r.fail("arrival.clients", "must be >= 1 (got " + std::to_string(out.clients) + ")");
  } else if (type == "trace") {
    r.only_keys(a, "arrival", {"type", "file"});
    out.kind = ArrivalSpec::Kind::trace;
    out.trace_path = read_file_name(r, r.require(a, "file", "arrival"), "arrival.file", base_dir);
  } else {
    r.fail("arrival.type", "must be \"poisson\", \"concurrency\" or \"trace\" (got \"" + type + "\")");
  }
}

// A length: a plain integer (fixed) or {"type": ..., ...}; min defaults to 1,
// max is required by every distribution (it is also what the tails clamp to).
LengthDist read_length(const Reader& r, const json& v, const std::string& where) {
  LengthDist d;
  if (v.is_number_integer()) {
    const int32_t n = r.integer<int32_t>(v, where);
    if (n < 1) r.fail(where, "must be >= 1 (got " + std::to_string(n) + ")");
    return LengthDist{.kind = LengthDist::Kind::fixed, .value = static_cast<double>(n), .min = n, .max = n};
  }
  if (!v.is_object()) r.wrong_type(where, v, "an integer or an object with a \"type\"");
  const json& t = r.require(v, "type", where);
  if (!t.is_string()) r.wrong_type(where + ".type", t, "a string");
  const std::string type = t.get<std::string>();
  if (type == "fixed") {
    r.only_keys(v, where, {"type", "value"});
    const int32_t n = r.integer<int32_t>(r.require(v, "value", where), where + ".value");
    if (n < 1) r.fail(where + ".value", "must be >= 1 (got " + std::to_string(n) + ")");
    return LengthDist{.kind = LengthDist::Kind::fixed, .value = static_cast<double>(n), .min = n, .max = n};
  }
  if (type == "uniform") {
    r.only_keys(v, where, {"type", "min", "max"});
    d.kind = LengthDist::Kind::uniform;
  } else if (type == "normal" || type == "lognormal") {
    r.only_keys(v, where, {"type", "mean", "stddev", "min", "max"});
    d.kind = type == "normal" ? LengthDist::Kind::normal : LengthDist::Kind::lognormal;
    d.mean = r.number(r.require(v, "mean", where), where + ".mean");
    d.stddev = r.number(r.require(v, "stddev", where), where + ".stddev");
    if (d.stddev < 0) r.fail(where + ".stddev", "must be >= 0 (got " + num(d.stddev) + ")");
    if (d.kind == LengthDist::Kind::lognormal && d.mean <= 0) {
      r.fail(where + ".mean", "must be > 0 for a lognormal length (got " + num(d.mean) + ")");
    }
  } else {
    r.fail(where + ".type",
           "must be \"fixed\", \"uniform\", \"normal\" or \"lognormal\" (got \"" + type + "\")");
  }
  d.min = 1;
  r.get(v, "min", where, d.min);
  d.max = r.integer<int32_t>(r.require(v, "max", where), where + ".max");
  if (d.min < 1) r.fail(where + ".min", "must be >= 1 (got " + std::to_string(d.min) + ")");
  if (d.max < d.min) {
    r.fail(where + ".max", "must be >= min (" + std::to_string(d.max) + " < " + std::to_string(d.min) + ")");
  }
  return d;
}

double read_fraction(const Reader& r, const json& obj, const char* key, const std::string& where) {
  const std::string p = Reader::path(where, key);
  const double f = r.number(r.require(obj, key, where), p);
  if (f < 0 || f > 1) r.fail(p, "must be in [0, 1] (got " + num(f) + ")");
  return f;
}

void read_shared_prefix(const Reader& r, const json& s, WorkloadSpec& w) {
  r.only_keys(s, "shared_prefix", {"fraction", "tokens", "groups"});
  w.shared_prefix_fraction = read_fraction(r, s, "fraction", "shared_prefix");
  r.get(s, "tokens", "shared_prefix", w.prefix_tokens);
  r.get(s, "groups", "shared_prefix", w.prefix_groups);
  if (w.prefix_tokens < 0 || (w.shared_prefix_fraction > 0 && w.prefix_tokens < 1)) {
    r.fail("shared_prefix.tokens", "must be >= 1 when fraction > 0 (got " + std::to_string(w.prefix_tokens) + ")");
  }
  if (w.prefix_groups < 1) {
    r.fail("shared_prefix.groups", "must be >= 1 (got " + std::to_string(w.prefix_groups) + ")");
  }
}

// The lines of a JSONL file with their numbers (1-based), blank ones left out.
std::vector<std::pair<int, std::string>> read_lines(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, path + ": cannot open the " + what);
  std::vector<std::pair<int, std::string>> lines;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.emplace_back(n, line);
  }
  if (in.bad()) throw Error(Errc::io, path + ": cannot read the " + what);
  return lines;
}

json parse_line(const Reader& r, const std::string& text) { return r.parse(text); }

}  // namespace

std::vector<TraceEntry> read_workload_trace(const std::string& path) {
  std::vector<TraceEntry> entries;
  for (const auto& [n, text] : read_lines(path, "trace")) {
    const Reader r(path + ": line " + std::to_string(n));
    const json line = parse_line(r, text);
    r.only_keys(line, "", {"t", "prompt_tokens", "prompt", "output_tokens", "priority"});
    TraceEntry e;
    e.t = r.number(r.require(line, "t", ""), "t");
    if (e.t < 0) r.fail("t", "must be >= 0 seconds (got " + num(e.t) + ")");
    if (!entries.empty() && e.t < entries.back().t) {
      r.fail("t", "goes back in time (" + num(e.t) + " after " + num(entries.back().t) +
                      " on the line before); a trace must be in arrival order");
    }
    if (line.contains("prompt_tokens") && line.contains("prompt")) {
      r.fail("", "give \"prompt_tokens\" or \"prompt\", not both");
    }
    r.get(line, "prompt_tokens", "", e.prompt_tokens);
    if (line.contains("prompt_tokens") && e.prompt_tokens < 1) {
      r.fail("prompt_tokens", "must be >= 1 (got " + std::to_string(e.prompt_tokens) + ")");
    }
    r.get(line, "prompt", "", e.prompt);
    if (line.contains("prompt") && e.prompt.empty()) r.fail("prompt", "must not be empty");
    r.get(line, "output_tokens", "", e.output_tokens);
    if (line.contains("output_tokens") && e.output_tokens < 1) {
      r.fail("output_tokens", "must be >= 1 (got " + std::to_string(e.output_tokens) + ")");
    }
    if (line.contains("priority")) {
      std::string p;
      r.get(line, "priority", "", p);
      if (p == "interactive") {
        e.priority = Priority::interactive;
      } else if (p == "batch") {
        e.priority = Priority::batch;
      } else {
        r.fail("priority", "must be \"interactive\" or \"batch\" (got \"" + p + "\")");
      }
    }
    entries.push_back(std::move(e));
  }
  if (entries.empty()) throw Error(Errc::bad_format, path + ": the trace holds no requests");
  return entries;
}

std::vector<std::string> read_prompt_dataset(const std::string& path) {
  std::vector<std::string> prompts;
  for (const auto& [n, text] : read_lines(path, "prompt dataset")) {
    const Reader r(path + ": line " + std::to_string(n));
    const json line = parse_line(r, text);
    // Other keys (ids, sources) are left alone: datasets often come from elsewhere.
    if (!line.is_object()) r.fail("", "must be an object with a \"prompt\" string");
    std::string prompt;
    r.get(line, "prompt", "", prompt);
    if (prompt.empty()) r.fail("prompt", "must be a non-empty string");
    prompts.push_back(std::move(prompt));
  }
  if (prompts.empty()) throw Error(Errc::bad_format, path + ": the prompt dataset holds no prompts");
  return prompts;
}

WorkloadSpec parse_workload(std::string_view text, const std::string& origin, const std::string& base_dir) {
  const Reader r(origin);
  const json root = r.parse(text);
  r.only_keys(root, "",
              {"name", "seed", "requests", "arrival", "prompt_tokens", "output_tokens", "prompts", "shared_prefix",
               "priorities", "ignore_eos"});
  WorkloadSpec w;
  r.get(root, "name", "", w.name);
  r.get(root, "seed", "", w.seed);
  read_arrival(r, r.require(root, "arrival", ""), base_dir, w.arrival);

  // A trace runs all its lines unless "requests" says fewer.
  const bool trace = w.arrival.kind == ArrivalSpec::Kind::trace;
  if (trace) w.n_requests = 0;
  r.get(root, "requests", "", w.n_requests);
  if (w.n_requests < (trace ? 0 : 1)) {
    r.fail("requests", std::string("must be ") + (trace ? ">= 0 (0: every line of the trace)" : ">= 1") + " (got " +
                           std::to_string(w.n_requests) + ")");
  }

  if (const json* v = r.find(root, "prompt_tokens")) w.prompt_tokens = read_length(r, *v, "prompt_tokens");
  if (const json* v = r.find(root, "output_tokens")) w.output_tokens = read_length(r, *v, "output_tokens");
  if (const json* v = r.find(root, "prompts")) {
    w.prompts_path = read_file_name(r, *v, "prompts", base_dir);
  }
  if (const json* v = r.find(root, "shared_prefix")) read_shared_prefix(r, *v, w);
  if (const json* v = r.find(root, "priorities")) {
    r.only_keys(*v, "priorities", {"batch"});
    w.batch_fraction = read_fraction(r, *v, "batch", "priorities");
  }
  r.get(root, "ignore_eos", "", w.ignore_eos);
  return w;
}

WorkloadSpec load_workload(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, path + ": cannot open the workload file");
  std::ostringstream text;
  text << in.rdbuf();
  const std::filesystem::path p(path);
  WorkloadSpec w = parse_workload(text.str(), path, p.parent_path().string());
  if (w.name.empty()) w.name = p.stem().string();  // poisson_short.json -> "poisson_short"
  return w;
}

}  // namespace troupe
