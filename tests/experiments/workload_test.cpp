// Workload files: the JSON format of configs/workloads/README.md, its
// errors (each naming the file and the key at fault), trace and prompt
// JSONL files, and the shipped workloads, which must all load and plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "experiments/workload.hpp"
#include "workload_test_util.hpp"

namespace troupe {
namespace {

using test::temp_dir;
using test::write_file;

// The error parse_workload throws for text, or a failure.
Error parse_error(const std::string& text) {
  try {
    parse_workload(text, "w.json", "");
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << text;
  return Error(Errc::internal, "");
}

TEST(WorkloadSpec, ParsesEveryKeyWithComments) {
  const WorkloadSpec w = parse_workload(R"({
    // a comment, as in the pipeline configs
    "name": "mix", "seed": 18446744073709551615, "requests": 64,
    "arrival": {"type": "poisson", "rate": 4},
    "prompt_tokens": {"type": "lognormal", "mean": 64, "stddev": 32, "min": 8, "max": 512},
    "output_tokens": {"type": "uniform", "min": 16, "max": 128},
    "prompts": "data/prompts.jsonl",
    "shared_prefix": {"fraction": 0.5, "tokens": 32, "groups": 2},
    "priorities": {"batch": 0.25},
    "ignore_eos": false
  })",
                                        "w.json", "/wl");
  EXPECT_EQ(w.name, "mix");
  EXPECT_EQ(w.seed, 18446744073709551615ull);
  EXPECT_EQ(w.n_requests, 64);
  EXPECT_EQ(w.arrival.kind, ArrivalSpec::Kind::poisson);
  EXPECT_DOUBLE_EQ(w.arrival.rate, 4.0);
  EXPECT_EQ(w.prompt_tokens.kind, LengthDist::Kind::lognormal);
  EXPECT_DOUBLE_EQ(w.prompt_tokens.mean, 64);
  EXPECT_DOUBLE_EQ(w.prompt_tokens.stddev, 32);
  EXPECT_EQ(w.prompt_tokens.min, 8);
  EXPECT_EQ(w.prompt_tokens.max, 512);
  EXPECT_EQ(w.output_tokens.kind, LengthDist::Kind::uniform);
  EXPECT_EQ(w.output_tokens.min, 16);
  EXPECT_EQ(w.output_tokens.max, 128);
  EXPECT_EQ(w.prompts_path, "/wl/data/prompts.jsonl");  // relative to the workload's folder
  EXPECT_DOUBLE_EQ(w.shared_prefix_fraction, 0.5);
  EXPECT_EQ(w.prefix_tokens, 32);
  EXPECT_EQ(w.prefix_groups, 2);
  EXPECT_DOUBLE_EQ(w.batch_fraction, 0.25);
  EXPECT_FALSE(w.ignore_eos);
}

TEST(WorkloadSpec, DefaultsAndOtherForms) {
  const WorkloadSpec w = parse_workload(R"({"arrival": {"type": "concurrency", "clients": 8},
                                           "prompt_tokens": 64,
                                           "output_tokens": {"type": "normal", "mean": 20, "stddev": 5, "max": 40}})",
                                        "w.json", "");
  EXPECT_EQ(w.n_requests, 16);
  EXPECT_EQ(w.seed, 0u);
  EXPECT_EQ(w.arrival.kind, ArrivalSpec::Kind::concurrency);
  EXPECT_EQ(w.arrival.clients, 8);
  EXPECT_EQ(w.prompt_tokens.kind, LengthDist::Kind::fixed);
  EXPECT_DOUBLE_EQ(w.prompt_tokens.value, 64);
  EXPECT_EQ(w.output_tokens.kind, LengthDist::Kind::normal);
  EXPECT_EQ(w.output_tokens.min, 1);  // min defaults to 1
  EXPECT_EQ(w.output_tokens.max, 40);
  EXPECT_TRUE(w.prompts_path.empty());
  EXPECT_EQ(w.shared_prefix_fraction, 0);
  EXPECT_EQ(w.batch_fraction, 0);
  EXPECT_TRUE(w.ignore_eos);

  const WorkloadSpec fixed = parse_workload(R"({"arrival": {"type": "poisson", "rate": 1},
                                               "prompt_tokens": {"type": "fixed", "value": 12}})",
                                            "w.json", "");
  EXPECT_EQ(fixed.prompt_tokens.kind, LengthDist::Kind::fixed);
  EXPECT_DOUBLE_EQ(fixed.prompt_tokens.value, 12);
}

TEST(WorkloadSpec, TraceRunsEveryLineUnlessToldAndResolvesItsPath) {
  const WorkloadSpec all = parse_workload(R"({"arrival": {"type": "trace", "file": "t.jsonl"}})", "w.json", "/a/b");
  EXPECT_EQ(all.arrival.kind, ArrivalSpec::Kind::trace);
  EXPECT_EQ(all.arrival.trace_path, "/a/b/t.jsonl");
  EXPECT_EQ(all.n_requests, 0);
  const WorkloadSpec some =
      parse_workload(R"({"requests": 5, "arrival": {"type": "trace", "file": "/abs/t.jsonl"}})", "w.json", "/a/b");
  EXPECT_EQ(some.arrival.trace_path, "/abs/t.jsonl");
  EXPECT_EQ(some.n_requests, 5);
}

TEST(WorkloadSpec, ErrorsNameTheFileAndTheKey) {
  const std::string poisson = R"("arrival": {"type": "poisson", "rate": 1})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{" + poisson + R"(, "rquests": 5})", "w.json: unknown key 'rquests'"},
      {R"({"requests": 5})", "w.json: arrival: is required"},
      {R"({"arrival": {"type": "poisson", "rate": "fast"}})", "w.json: arrival.rate: must be a number (got string)"},
      {R"({"arrival": {"type": "poisson", "rate": 0}})", "w.json: arrival.rate: must be > 0"},
      {R"({"arrival": {"type": "poisson"}})", "w.json: arrival.rate: is required"},
      {R"({"arrival": {"type": "poisson", "rate": 1, "clients": 2}})", "w.json: arrival: unknown key 'clients'"},
      {R"({"arrival": {"type": "burst"}})", "w.json: arrival.type: must be \"poisson\""},
      {R"({"arrival": {"type": "concurrency", "clients": 0}})", "w.json: arrival.clients: must be >= 1"},
      {R"({"arrival": {"type": "concurrency", "clients": 1.5}})", "w.json: arrival.clients: must be an integer"},
      {R"({"arrival": {"type": "trace", "file": 3}})", "w.json: arrival.file: must be a file name"},
      {"{" + poisson + R"(, "requests": 0})", "w.json: requests: must be >= 1"},
      {"{" + poisson + R"(, "seed": -1})", "w.json: seed: must be a non-negative integer"},
      {"{" + poisson + R"(, "seed": "7"})", "w.json: seed: must be a non-negative integer (got string)"},
      {"{" + poisson + R"(, "name": 7})", "w.json: name: must be a string"},
      {"{" + poisson + R"(, "prompt_tokens": 0})", "w.json: prompt_tokens: must be >= 1"},
      {"{" + poisson + R"(, "prompt_tokens": 1.5})", "w.json: prompt_tokens: must be an integer or an object"},
      {"{" + poisson + R"(, "prompt_tokens": {"type": "uniform", "min": 10, "max": 5}})",
       "w.json: prompt_tokens.max: must be >= min (5 < 10)"},
      {"{" + poisson + R"(, "prompt_tokens": {"type": "uniform", "min": 0, "max": 5}})",
       "w.json: prompt_tokens.min: must be >= 1"},
      {"{" + poisson + R"(, "prompt_tokens": {"type": "uniform", "min": 1}})", "w.json: prompt_tokens.max: is required"},
      {"{" + poisson + R"(, "prompt_tokens": {"type": "zipf", "max": 5}})", "w.json: prompt_tokens.type: must be"},
      {"{" + poisson + R"(, "output_tokens": {"type": "normal", "mean": 5, "max": 9}})",
       "w.json: output_tokens.stddev: is required"},
      {"{" + poisson + R"(, "output_tokens": {"type": "normal", "mean": 5, "stddev": -1, "max": 9}})",
       "w.json: output_tokens.stddev: must be >= 0"},
      {"{" + poisson + R"(, "output_tokens": {"type": "lognormal", "mean": 0, "stddev": 1, "max": 9}})",
       "w.json: output_tokens.mean: must be > 0"},
      {"{" + poisson + R"(, "output_tokens": {"type": "uniform", "min": 1, "max": 9, "mean": 3}})",
       "w.json: output_tokens: unknown key 'mean'"},
      {"{" + poisson + R"(, "prompts": ""})", "w.json: prompts: must not be empty"},
      {"{" + poisson + R"(, "shared_prefix": {"fraction": 1.5, "tokens": 4}})",
       "w.json: shared_prefix.fraction: must be in [0, 1]"},
      {"{" + poisson + R"(, "shared_prefix": {"fraction": 0.5}})", "w.json: shared_prefix.tokens: must be >= 1"},
      {"{" + poisson + R"(, "shared_prefix": {"fraction": 0.5, "tokens": 8, "groups": 0}})",
       "w.json: shared_prefix.groups: must be >= 1"},
      {"{" + poisson + R"(, "priorities": {"batch": -0.1}})", "w.json: priorities.batch: must be in [0, 1]"},
      {"{" + poisson + R"(, "priorities": {"interactive": 0.5}})", "w.json: priorities: unknown key 'interactive'"},
      {"{" + poisson + R"(, "ignore_eos": "yes"})", "w.json: ignore_eos: must be a boolean"},
      {"{" + poisson + ",}", "w.json: not valid JSON"},
      {"[1, 2]", "w.json: must be an object"},
  };
  for (const auto& [text, expected] : cases) {
    const Error e = parse_error(text);
    EXPECT_EQ(e.code(), Errc::bad_format) << text;
    EXPECT_EQ(std::string(e.what()).rfind(expected, 0), 0u) << "for " << text << "\n got: " << e.what();
  }
}

TEST(WorkloadSpec, LoadNamesTheWorkloadAfterItsFile) {
  const auto dir = temp_dir();
  const std::string path = write_file(dir / "burst_4.json", R"({"arrival": {"type": "trace", "file": "t.jsonl"}})");
  const WorkloadSpec w = load_workload(path);
  EXPECT_EQ(w.name, "burst_4");
  EXPECT_EQ(w.arrival.trace_path, (dir / "t.jsonl").string());
  try {
    load_workload((dir / "missing.json").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
    EXPECT_NE(std::string(e.what()).find("missing.json"), std::string::npos) << e.what();
  }
}

TEST(WorkloadTrace, ReadsLinesSkippingBlankOnes) {
  const auto dir = temp_dir();
  const std::string path = write_file(dir / "t.jsonl",
                                      "{\"t\": 0, \"prompt_tokens\": 50, \"output_tokens\": 20}\n"
                                      "\n"
                                      "{\"t\": 0.5, \"prompt\": \"Once upon a time\", \"priority\": \"batch\"}\n"
                                      "{\"t\": 0.5}\n");
  const std::vector<TraceEntry> t = read_workload_trace(path);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].t, 0);
  EXPECT_EQ(t[0].prompt_tokens, 50);
  EXPECT_EQ(t[0].output_tokens, 20);
  EXPECT_FALSE(t[0].priority.has_value());
  EXPECT_EQ(t[1].t, 0.5);
  EXPECT_EQ(t[1].prompt, "Once upon a time");
  EXPECT_EQ(t[1].prompt_tokens, -1);
  EXPECT_EQ(t[1].output_tokens, -1);
  EXPECT_EQ(t[1].priority, Priority::batch);
  EXPECT_EQ(t[2].t, 0.5);  // equal times are fine: a burst
}

TEST(WorkloadTrace, ErrorsNameTheLine) {
  const auto dir = temp_dir();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"t\": 1}\n\n{\"t\": 0.5}\n", ": line 3: t: goes back in time (0.5 after 1"},
      {"{\"t\": -1}\n", ": line 1: t: must be >= 0"},
      {"{\"prompt_tokens\": 3}\n", ": line 1: t: is required"},
      {"{\"t\": 0, \"prompt_tokens\": 3, \"prompt\": \"a\"}\n", ": line 1: give \"prompt_tokens\" or \"prompt\""},
      {"{\"t\": 0, \"prompt_tokens\": 0}\n", ": line 1: prompt_tokens: must be >= 1"},
      {"{\"t\": 0, \"output_tokens\": \"many\"}\n", ": line 1: output_tokens: must be an integer"},
      {"{\"t\": 0, \"prompt\": \"\"}\n", ": line 1: prompt: must not be empty"},
      {"{\"t\": 0, \"priority\": \"urgent\"}\n", ": line 1: priority: must be \"interactive\" or \"batch\""},
      {"{\"t\": 0, \"arrival\": 1}\n", ": line 1: unknown key 'arrival'"},
      {"{\"t\": 0}\n{\"t\": \n", ": line 2: not valid JSON"},
      {"\n\n", ": the trace holds no requests"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string path = write_file(dir / "t.jsonl", text);
    try {
      read_workload_trace(path);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::bad_format) << text;
      EXPECT_EQ(std::string(e.what()).rfind(path + expected, 0), 0u) << "for " << text << "\n got: " << e.what();
    }
  }
  try {
    read_workload_trace((dir / "none.jsonl").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
  }
}

TEST(WorkloadPrompts, ReadsTheDatasetIgnoringOtherKeys) {
  const auto dir = temp_dir();
  const std::string path =
      write_file(dir / "p.jsonl", "{\"prompt\": \"Hello\", \"id\": 1}\n\n{\"prompt\": \"Tell me a story.\"}\n");
  EXPECT_EQ(read_prompt_dataset(path), (std::vector<std::string>{"Hello", "Tell me a story."}));

  for (const auto& [text, expected] :
       std::vector<std::pair<std::string, std::string>>{{"{\"prompt\": \"a\"}\n{\"text\": \"b\"}\n", ": line 2: prompt:"},
                                                        {"{\"prompt\": 3}\n", ": line 1: prompt: must be a string"},
                                                        {"\"just text\"\n", ": line 1: must be an object"},
                                                        {"", ": the prompt dataset holds no prompts"}}) {
    write_file(dir / "p.jsonl", text);
    try {
      read_prompt_dataset(path);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + expected, 0), 0u) << "for " << text << "\n got: " << e.what();
    }
  }
}

// Every shipped workload loads and plans for the stories260K tokenizer
// (context 512), with its trace and dataset files where it names them.
TEST(WorkloadConfigs, ShippedWorkloadsLoadAndPlan) {
  const std::filesystem::path dir = std::filesystem::path(TROUPE_FIXTURES_DIR) / ".." / ".." / "configs" / "workloads";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    names.insert(entry.path().stem().string());
    SCOPED_TRACE(entry.path().string());
    const WorkloadSpec w = load_workload(entry.path().string());
    EXPECT_EQ(w.name, entry.path().stem().string());
    const std::vector<PlannedRequest> plan = plan_workload(w, test::stories_tokenizer(), 512);
    EXPECT_FALSE(plan.empty());
    for (const PlannedRequest& r : plan) {
      EXPECT_GE(r.prompt.size(), 1u);
      EXPECT_LE(r.prompt.size(), 512u);
      EXPECT_GE(r.max_new_tokens, 1);
    }
  }
  // The ones README.md describes.
  for (const char* name : {"poisson_short", "concurrency_8", "shared_prefix", "mixed_priority", "trace_example",
                           "chat_prompts"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
}

}  // namespace
}  // namespace troupe
