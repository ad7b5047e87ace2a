// A stage in another process against the same stage in this one: the
// per-step time of a 2-process chain over loopback (the head runs the first
// layers, a `troupe stage` worker the rest) against the 2-stage chain in one
// process, both with one kernel thread per stage, at N concurrent greedy
// streams; and the bytes that cross per step (the serialized messages, and
// what the loopback interface counted). Rounds alternate; each kind's
// median round is reported (the best too: a shared 2-core machine is
// noisy). Prints a Markdown table.
//   bench_remote [--streams 8] [--tokens 64] [--prompt 32] [--rounds 3]
//                [--split L] [--troupe build/release/troupe] model.gguf
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_serializer.hpp>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/pipeline.hpp"
#include "model/model_identity.hpp"
#include "model/model_tokenizer.hpp"

extern char** environ;

namespace {

using namespace troupe;
using BenchClock = std::chrono::steady_clock;

struct Args {
  int streams = 8;
  int tokens = 64;
  int prompt = 32;
  int rounds = 3;
  int64_t split = -1;
  std::string troupe = "build/release/troupe";
  std::string model;
};

// A `troupe stage` process on a free loopback port.
struct Worker {
  pid_t pid = -1;
  uint16_t port = 0;

  void start(const Args& a, int64_t split) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    std::vector<std::string> argv{a.troupe, "stage", "-m", a.model, "--layers", std::to_string(split) + ":",
                                  "-t", "1", "--listen", "127.0.0.1:0"};
    std::vector<char*> c;
    for (std::string& s : argv) c.push_back(s.data());
    c.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    if (posix_spawn(&pid, c[0], &fa, nullptr, c.data(), environ) != 0) throw std::runtime_error("cannot run " + a.troupe);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    std::string line;
    char ch = 0;
    while (read(fds[0], &ch, 1) == 1 && ch != '\n') line += ch;
    close(fds[0]);
    const size_t at = line.find("listening on 127.0.0.1:");
    if (at == std::string::npos) throw std::runtime_error("the worker did not start: " + line);
    port = static_cast<uint16_t>(std::stoi(line.substr(at + 23)));
  }
  ~Worker() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
};

uint64_t loopback_tx_bytes() {
  std::ifstream in("/proc/net/dev");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || line.substr(0, colon).find("lo") == std::string::npos) continue;
    std::istringstream f(line.substr(colon + 1));
    uint64_t v[9] = {};
    for (uint64_t& x : v) f >> x;
    return v[8];  // transmit bytes
  }
  return 0;
}

struct Run {
  double seconds = 0;
  uint64_t steps = 0;
  int64_t tokens = 0;
  uint64_t lo_bytes = 0;
};

Run run_once(Pipeline& p, const std::vector<int32_t>& prompt, const Args& a) {
  const uint64_t steps0 = p.stats().steps;
  const uint64_t lo0 = loopback_tx_bytes();
  std::vector<std::future<Completion>> runs;
  GenerateParams params{.max_new_tokens = a.tokens, .ignore_eos = true};
  params.sampling.temperature = 0;
  const auto t0 = BenchClock::now();
  for (int i = 0; i < a.streams; ++i) {
    std::vector<int32_t> pr = prompt;
    pr.back() = static_cast<int32_t>((pr.back() + i) % p.model().config().n_vocab);  // no shared prefix
    runs.push_back(p.generate(pr, params));
  }
  Run r;
  for (auto& f : runs) r.tokens += f.get().final.completion_tokens;
  r.seconds = std::chrono::duration<double>(BenchClock::now() - t0).count();
  r.steps = p.stats().steps - steps0;
  r.lo_bytes = loopback_tx_bytes() - lo0;
  return r;
}

size_t wire_size(caf::actor_system& sys, auto msg) {
  caf::binary_serializer::container_type buf;
  caf::binary_serializer sink{sys, buf};
  if (auto err = sink(msg)) throw std::runtime_error("serialize: " + sys.render(err));
  return buf.size();
}

int run(const Args& a) {
  auto model = Model::load(a.model);
  auto tok = load_model_tokenizer(*model);
  const ModelConfig& c = model->config();
  const int64_t split = a.split > 0 ? a.split : c.n_layer / 2;
  std::vector<int32_t> prompt;
  for (int i = 0; i < a.prompt; ++i) prompt.push_back(static_cast<int32_t>(1 + (i * 7919) % (c.n_vocab - 1)));

  Worker worker;
  worker.start(a, split);
  auto config = [&](bool remote) {
    PipelineConfig pc{.model = model};
    pc.stages = {{.first_layer = 0, .last_layer = split, .threads = 1},
                 {.first_layer = split, .last_layer = -1, .threads = 1}};
    if (remote) pc.stages[1].remote = "127.0.0.1:" + std::to_string(worker.port);
    pc.scheduler.max_batch_size = 64;
    pc.scheduler.max_tokens_per_step = 2048;
    return pc;
  };
  std::vector<Run> runs[2];
  for (int round = 0; round < a.rounds; ++round) {
    for (int kind = 0; kind < 2; ++kind) {
      auto p = Pipeline::start(config(kind == 1));
      run_once(*p, prompt, {.streams = 1, .tokens = 4, .prompt = a.prompt});  // warm up
      const Run r = run_once(*p, prompt, a);
      runs[kind].push_back(r);
      std::fprintf(stderr, "round %d %s: %.3f s, %llu steps, %lld tokens\n", round, kind ? "2 processes" : "1 process",
                   r.seconds, static_cast<unsigned long long>(r.steps), static_cast<long long>(r.tokens));
    }
  }

  // The messages of one decode step of every stream, serialized as the
  // middleman sends them: the step (block tables included) and hidden
  // states in, and the logits back.
  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::troupe>();
  caf::actor_system sys{cfg};
  RemoteStep step{.session = 1, .batch = {.step = 1}};
  const int32_t blocks = (a.prompt + a.tokens + 15) / 16;
  for (int i = 0; i < a.streams; ++i) {
    StageSeq s{.id = static_cast<RequestId>(i), .n_tokens = 1, .n_past = a.prompt + a.tokens / 2, .n_logits = 1};
    for (int32_t b = 0; b < blocks; ++b) s.block_table.push_back(i * blocks + b);
    step.batch.seqs.push_back(s);
    step.batch.tokens.push_back(1);
  }
  step.batch.hidden = make_tensor(a.streams, c.n_embd);
  // Back: the worker's sampler answers the scheduler with the tokens, and
  // the link gets an acknowledgement; the logits stay on the worker.
  SampledStep sampled{.step = 1};
  for (int i = 0; i < a.streams; ++i) sampled.tokens.push_back({.id = static_cast<RequestId>(i), .token = 1});
  const StageOutput ack{.step = 1, .sampled = true};
  const StageOutput logits_back{.step = 1, .out = make_tensor(a.streams, c.n_vocab)};
  const size_t in_bytes = wire_size(sys, step);
  const size_t back_bytes = wire_size(sys, sampled) + wire_size(sys, ack);
  const size_t logits_bytes = wire_size(sys, logits_back);

  Run best[2];
  for (int k = 0; k < 2; ++k) {
    std::sort(runs[k].begin(), runs[k].end(), [](const Run& x, const Run& y) { return x.seconds < y.seconds; });
    best[k] = runs[k][runs[k].size() / 2];  // the median round
  }
  const double per_step[2] = {best[0].seconds / static_cast<double>(best[0].steps),
                              best[1].seconds / static_cast<double>(best[1].steps)};
  const double fastest[2] = {runs[0].front().seconds / static_cast<double>(runs[0].front().steps),
                             runs[1].front().seconds / static_cast<double>(runs[1].front().steps)};
  std::printf("| chain (%s, %d streams x %d tokens, layers split at %lld; median of %d rounds) | tok/s | steps | ms/step | loopback bytes/step |\n",
              model_display_name(*model).c_str(), a.streams, a.tokens, static_cast<long long>(split), a.rounds);
  std::printf("|---|---|---|---|---|\n");
  const char* names[2] = {"2 stages, 1 process", "2 stages, 2 processes (loopback)"};
  for (int k = 0; k < 2; ++k) {
    std::printf("| %s | %.1f | %llu | %.3f | %.0f |\n", names[k], static_cast<double>(best[k].tokens) / best[k].seconds,
                static_cast<unsigned long long>(best[k].steps), per_step[k] * 1e3,
                static_cast<double>(best[k].lo_bytes) / static_cast<double>(best[k].steps));
  }
  std::printf("\nper-step time, 2 processes / 1 process: %.3f (median rounds), %.3f (fastest rounds)\n",
              per_step[1] / per_step[0], fastest[1] / fastest[0]);
  std::printf("serialized per decode step of %d streams: %zu bytes to the worker (hidden [%d, %lld] f32 = %lld), "
              "%zu bytes back (the sampled tokens and an acknowledgement; sending the logits [%d, %lld] f32 instead "
              "would be %zu)\n",
              a.streams, in_bytes, a.streams, static_cast<long long>(c.n_embd),
              static_cast<long long>(a.streams * c.n_embd * 4), back_bytes, a.streams,
              static_cast<long long>(c.n_vocab), logits_bytes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(s + " needs a value");
      return argv[++i];
    };
    if (s == "--streams") a.streams = std::stoi(next());
    else if (s == "--tokens") a.tokens = std::stoi(next());
    else if (s == "--prompt") a.prompt = std::stoi(next());
    else if (s == "--rounds") a.rounds = std::stoi(next());
    else if (s == "--split") a.split = std::stoll(next());
    else if (s == "--troupe") a.troupe = next();
    else a.model = s;
  }
  if (a.model.empty()) {
    std::fprintf(stderr, "usage: bench_remote [--streams N] [--tokens N] [--prompt N] [--rounds N] [--split L] [--troupe PATH] model.gguf\n");
    return 2;
  }
  try {
    return run(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_remote: %s\n", e.what());
    return 1;
  }
}
