// The load client against the real server (stories260K, in-process, on a
// free port): open-loop and closed-loop runs time every streamed chunk and
// count tokens as the server does; a refused connection, an HTTP error and
// a server that never answers are records with a message, not exceptions.
// Also the SSE splitter and the Prometheus text parser on their own.
#include "experiments/load_client.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "net/pipeline_client.hpp"
#include "net/routes.hpp"
#include "net/server.hpp"
#include "net/sse_splitter.hpp"

namespace troupe {
namespace {

using net::PipelineClient;
using net::Server;
using net::ServerCore;
using net::SseSplitter;

// A loopback TCP socket bound to a free port; `listening` makes the kernel
// complete handshakes into the backlog without anyone ever answering.
class RawSocket {
 public:
  explicit RawSocket(bool listening) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || (listening && ::listen(fd_, 8) != 0)) {
      throw Error(Errc::io, "cannot set up a loopback socket for the test");
    }
    port_ = ntohs(addr.sin_port);
  }
  ~RawSocket() { ::close(fd_); }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;
  uint16_t port() const { return port_; }

 private:
  int fd_;
  uint16_t port_ = 0;
};

// 6 requests of 8 prompt tokens and 8 output tokens; every other one batch.
std::vector<PlannedRequest> small_plan() {
  std::vector<PlannedRequest> plan;
  const double arrivals[] = {0.0, 0.013, 0.021, 0.052, 0.060, 0.094};  // a Poisson draw at ~60 req/s
  for (int32_t i = 0; i < 6; ++i) {
    PlannedRequest p{.index = i, .arrival_s = arrivals[i], .max_new_tokens = 8};
    for (int32_t t = 0; t < 8; ++t) p.prompt.push_back(100 + 17 * i + t);
    p.priority = i % 2 == 0 ? Priority::interactive : Priority::batch;
    plan.push_back(std::move(p));
  }
  return plan;
}

void expect_well_formed(const std::vector<RequestRecord>& records, const std::vector<PlannedRequest>& plan) {
  ASSERT_EQ(records.size(), plan.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const RequestRecord& r = records[i];
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.index, plan[i].index);
    EXPECT_EQ(r.output_tokens, 8);
    EXPECT_EQ(r.prompt_tokens, 8);
    EXPECT_GE(r.sent_s, r.scheduled_s);
    EXPECT_GE(r.first_token_s, r.sent_s);
    ASSERT_FALSE(r.token_s.empty());
    EXPECT_LE(r.token_s.size(), 8u);  // a chunk per token with text (held-back text merges chunks)
    EXPECT_EQ(r.token_s.front(), r.first_token_s);
    for (size_t k = 1; k < r.token_s.size(); ++k) EXPECT_LE(r.token_s[k - 1], r.token_s[k]);
    EXPECT_GE(r.end_s, r.token_s.back());
  }
}

class LoadClient : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = new PipelineClient(
        {.pipeline = {.model_path = std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf",
                      .stages = {{.first_layer = 0, .last_layer = -1, .threads = 1}},
                      .n_kv_blocks = 64}});
    ASSERT_TRUE(backend_->wait_loaded()) << backend_->load_state().stage;
    core_ = new ServerCore(*backend_, {});
    server_ = Server::start(*core_, {.port = 0}).release();
  }
  static void TearDownTestSuite() {
    // As `troupe serve` does: connections and I/O threads stop, then the
    // pipeline, then the server's handlers and the core go.
    server_->stop();
    delete backend_;
    delete server_;
    delete core_;
  }

  static LoadClientOptions options() { return {.port = server_->port(), .model = "stories260K", .timeout_s = 60}; }

  static PipelineClient* backend_;
  static ServerCore* core_;
  static Server* server_;
};

PipelineClient* LoadClient::backend_ = nullptr;
ServerCore* LoadClient::core_ = nullptr;
Server* LoadClient::server_ = nullptr;

TEST_F(LoadClient, OpenLoopFollowsArrivalTimes) {
  const std::vector<PlannedRequest> plan = small_plan();
  const std::vector<RequestRecord> records = run_against_server(plan, /*ignore_eos=*/true, /*clients=*/0, options());
  expect_well_formed(records, plan);
  for (size_t i = 0; i < records.size(); ++i) EXPECT_DOUBLE_EQ(records[i].scheduled_s, plan[i].arrival_s);
}

TEST_F(LoadClient, ClosedLoopOfTwoClientsDiscoversTheModel) {
  const std::vector<PlannedRequest> plan = small_plan();
  LoadClientOptions o = options();
  o.model.clear();  // taken from GET /v1/models
  const std::vector<RequestRecord> records = run_against_server(plan, /*ignore_eos=*/true, /*clients=*/2, o);
  expect_well_formed(records, plan);
  // Two clients: at no moment are three requests open.
  for (const RequestRecord& r : records) {
    int open = 0;
    for (const RequestRecord& other : records) open += other.sent_s <= r.sent_s && other.end_s > r.sent_s;
    EXPECT_LE(open, 2) << "at " << r.sent_s;
  }
}

TEST_F(LoadClient, ClosedPortIsAFailedRecord) {
  uint16_t port = 0;
  {
    RawSocket s(/*listening=*/false);  // bound, never listening: its port refuses
    port = s.port();
  }
  LoadClientOptions o = options();
  o.port = port;
  const std::vector<RequestRecord> records = run_against_server({small_plan()[0]}, true, 0, o);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].ok);
  EXPECT_NE(records[0].error.find("connecting"), std::string::npos) << records[0].error;
  EXPECT_NE(records[0].error.find(std::to_string(port)), std::string::npos) << records[0].error;
  EXPECT_THROW(scrape_metrics(o), Error);
}

TEST_F(LoadClient, ServerThatNeverAnswersTimesOut) {
  RawSocket silent(/*listening=*/true);
  LoadClientOptions o = options();
  o.port = silent.port();
  o.timeout_s = 0.3;
  const std::vector<RequestRecord> records = run_against_server({small_plan()[0]}, true, 0, o);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].ok);
  EXPECT_NE(records[0].error.find("timed out after 0.3 s"), std::string::npos) << records[0].error;
  EXPECT_LT(records[0].end_s - records[0].sent_s, 10.0);
}

TEST_F(LoadClient, HttpErrorCarriesTheServersMessage) {
  LoadClientOptions o = options();
  o.model = "no-such-model";
  const std::vector<RequestRecord> records = run_against_server({small_plan()[0]}, true, 0, o);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].ok);
  EXPECT_EQ(records[0].error.rfind("HTTP 4", 0), 0u) << records[0].error;
  EXPECT_NE(records[0].error.find("no-such-model"), std::string::npos) << records[0].error;
  EXPECT_LT(records[0].first_token_s, 0);
}

TEST_F(LoadClient, ScrapeMetricsSeesTheRequests) {
  run_against_server({small_plan()[0]}, true, 0, options());
  const std::map<std::string, double> m = scrape_metrics(options());
  double requests = 0, disconnects = 0;
  for (const auto& [key, value] : m) {
    const std::string name = key.substr(0, key.find('{'));
    if (name == "troupe_requests_total") requests += value;
    if (name == "troupe_client_disconnects_total") disconnects += value;
  }
  EXPECT_GT(requests, 0);
  // Every stream was read to its end: the server saw no client leave mid-reply.
  EXPECT_EQ(disconnects, 0);
  EXPECT_TRUE(m.count("troupe_kv_blocks_total")) << "an unlabelled metric";
  EXPECT_TRUE(m.count("troupe_preemptions_total"));
}

TEST(SseSplitter, EventsSurviveAnyCut) {
  const std::string stream =
      "data: {\"a\": 1}\n\n: a comment\n\ndata: two\r\ndata: lines\r\n\r\nevent: x\nid: 7\ndata:[DONE]\n\n";
  const std::vector<std::string> expected = {"{\"a\": 1}", "two\nlines", "[DONE]"};
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseSplitter s;
    std::vector<std::string> got = s.feed(std::string_view(stream).substr(0, cut));
    for (std::string& e : s.feed(std::string_view(stream).substr(cut))) got.push_back(std::move(e));
    EXPECT_EQ(got, expected) << "cut at " << cut;
  }
  SseSplitter unfinished;
  EXPECT_TRUE(unfinished.feed("data: not ended\n").empty());
}

TEST(MetricsText, NamesKeepTheirLabels) {
  const std::map<std::string, double> m = parse_metrics_text(
      "# HELP troupe_requests_total Requests accepted\n"
      "# TYPE troupe_requests_total counter\n"
      "troupe_requests_total{endpoint=\"completions\"} 6\n"
      "troupe_client_disconnects_total{reason=\"slow reader } \\\" x\"} 2 1700000000000\n"
      "troupe_kv_blocks_total 64\n"
      "latency_bucket{le=\"+Inf\"} 3\n"
      "gauge_inf +Inf\n"
      "\n"
      "broken{label=\"never closed 1\n"
      "no_value\n"
      "not_a_number abc\n");
  EXPECT_EQ(m.size(), 5u);
  EXPECT_EQ(m.at("troupe_requests_total{endpoint=\"completions\"}"), 6);
  EXPECT_EQ(m.at("troupe_client_disconnects_total{reason=\"slow reader } \\\" x\"}"), 2);
  EXPECT_EQ(m.at("troupe_kv_blocks_total"), 64);
  EXPECT_EQ(m.at("latency_bucket{le=\"+Inf\"}"), 3);
  EXPECT_TRUE(std::isinf(m.at("gauge_inf")));
}

}  // namespace
}  // namespace troupe
