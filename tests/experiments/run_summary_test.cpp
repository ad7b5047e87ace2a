// Run summaries from hand-made records: latencies are the percentiles of
// the right differences, failed requests count in `requests` but not in
// the latencies, throughput divides by first-sent to last-ended; the CSV
// has as many fields per row as its header.
#include "experiments/run_summary.hpp"

#include <gtest/gtest.h>

#include <sstream>

namespace troupe {
namespace {

RequestRecord rec(int32_t i, double sent, double first, std::vector<double> tokens, double end, double queue) {
  return {.index = i,
          .sent_s = sent,
          .first_token_s = first,
          .end_s = end,
          .queue_s = queue,
          .token_s = std::move(tokens),
          .prompt_tokens = 10,
          .output_tokens = 3,
          .ok = true};
}

TEST(RunSummary, LatenciesAndThroughput) {
  std::vector<RequestRecord> r;
  r.push_back(rec(0, 0.0, 0.1, {0.1, 0.2, 0.4}, 0.5, 0.05));  // TTFT 0.1, gaps 0.1 0.2, E2E 0.5
  r.push_back(rec(1, 1.0, 1.3, {1.3, 1.4, 1.5}, 2.0, 0.15));  // TTFT 0.3, gaps 0.1 0.1, E2E 1.0
  RequestRecord failed{.index = 2, .sent_s = 0.5, .end_s = 0.6, .ok = false, .error = "error: boom"};
  r.push_back(failed);
  const RunSummary s = summarize_run(r);
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.ok, 2);
  EXPECT_DOUBLE_EQ(s.duration_s, 2.0);
  EXPECT_DOUBLE_EQ(s.req_per_s, 1.0);
  EXPECT_DOUBLE_EQ(s.output_tok_per_s, 3.0);
  EXPECT_DOUBLE_EQ(s.total_tok_per_s, 13.0);
  EXPECT_NEAR(s.ttft.p50, 0.2, 1e-12);
  EXPECT_NEAR(s.ttft.max, 0.3, 1e-12);
  EXPECT_EQ(s.itl.count, 4);
  EXPECT_NEAR(s.itl.p50, 0.1, 1e-12);
  EXPECT_NEAR(s.itl.max, 0.2, 1e-12);
  EXPECT_NEAR(s.e2e.p50, 0.75, 1e-12);
  EXPECT_NEAR(s.queue.p99, 0.05 + 0.99 * 0.1, 1e-12);
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_NE(s.errors[0].find("boom"), std::string::npos);
}

size_t fields(const std::string& line) {
  size_t n = 1;
  bool quoted = false;
  for (const char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) ++n;
  }
  return n;
}

TEST(RunSummary, CsvRowsMatchTheHeader) {
  RunSummary s = summarize_run({rec(0, 0.0, 0.1, {0.1, 0.2}, 0.3, 0.0)});
  s.topology = "two, stages";  // needs quoting
  s.setting = "scheduler.max_batch_size=8";
  s.rate = 2;
  s.engine.anomalies = {{"ttft", 2}, {"step_time", 1}};
  std::string header = csv_header();
  std::string row = csv_row(s);
  header.pop_back();
  row.pop_back();
  EXPECT_EQ(fields(row), fields(header));
  EXPECT_NE(row.find("\"two, stages\""), std::string::npos);
  const std::string md = markdown_table({s});
  EXPECT_NE(md.find("2.00 req/s"), std::string::npos);
  EXPECT_NE(md.find("| 2 / 1 |"), std::string::npos);  // anomalies: TTFT / step time
}

}  // namespace
}  // namespace troupe
