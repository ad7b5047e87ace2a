// WorkloadSpec -> the exact requests of a run. Every draw comes from
// SeededRandom (experiments/seeded_random.hpp) in separate streams: arrival
// gaps, the shared prefixes, and one stream per request index. So sweeping
// the rate of a Poisson workload keeps every request's prompt and lengths
// and only stretches the timeline, and a plan of n requests is the first n
// of a longer plan with the same seed.
#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "experiments/seeded_random.hpp"
#include "experiments/workload.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {
namespace {

// Stream numbers of one seed; fixed forever, or old plans would change.
constexpr uint64_t kArrivalStream = 1;
constexpr uint64_t kPrefixStream = 2;
constexpr uint64_t kRequestStream = 3;

// Rounded to the nearest integer, inside [min, max]. A fixed length ignores
// min/max (a spec built in code may leave them at their defaults).
int32_t draw_length(const LengthDist& d, SeededRandom& rng) {
  double x = 0;
  switch (d.kind) {
    case LengthDist::Kind::fixed:
      return std::max<int32_t>(1, static_cast<int32_t>(std::llround(d.value)));
    case LengthDist::Kind::uniform:
      return d.min + static_cast<int32_t>(rng.below(static_cast<int64_t>(d.max) - d.min + 1));
    case LengthDist::Kind::normal:
      x = d.mean + d.stddev * rng.normal();
      break;
    case LengthDist::Kind::lognormal: {
      // Parameters of the underlying normal such that the length itself has
      // mean m and stddev s: sigma^2 = ln(1 + s^2/m^2), mu = ln m - sigma^2/2.
      const double sigma2 = std::log1p((d.stddev * d.stddev) / (d.mean * d.mean));
      const double mu = std::log(d.mean) - sigma2 / 2;
      x = std::exp(mu + std::sqrt(sigma2) * rng.normal());
      break;
    }
  }
  // Clamped before rounding so a wild tail never overflows the conversion.
  x = std::clamp(x, static_cast<double>(d.min), static_cast<double>(d.max));
  return static_cast<int32_t>(std::llround(x));
}

void check_spec(const WorkloadSpec& s, int32_t max_prompt_tokens) {
  const auto bad = [&](const std::string& what) {
    throw Error(Errc::invalid_argument, "workload '" + s.name + "': " + what);
  };
  if (max_prompt_tokens < 1) bad("the prompt cap must be >= 1 token (got " + std::to_string(max_prompt_tokens) + ")");
  if (s.arrival.kind == ArrivalSpec::Kind::poisson && !(s.arrival.rate > 0)) bad("the Poisson rate must be > 0");
  if (s.arrival.kind == ArrivalSpec::Kind::concurrency && s.arrival.clients < 1) bad("clients must be >= 1");
  if (s.arrival.kind != ArrivalSpec::Kind::trace && s.n_requests < 1) bad("requests must be >= 1");
  for (const LengthDist* d : {&s.prompt_tokens, &s.output_tokens}) {
    if (d->kind != LengthDist::Kind::fixed && (d->min < 1 || d->max < d->min)) bad("a length needs 1 <= min <= max");
  }
  if (!(s.shared_prefix_fraction >= 0 && s.shared_prefix_fraction <= 1)) bad("shared_prefix.fraction must be in [0, 1]");
  if (!(s.batch_fraction >= 0 && s.batch_fraction <= 1)) bad("priorities.batch must be in [0, 1]");
  if (s.shared_prefix_fraction > 0) {
    if (s.prefix_tokens < 1 || s.prefix_groups < 1) bad("shared_prefix needs tokens >= 1 and groups >= 1");
    // A prefixed prompt is the prefix and at least one token of its own;
    // cutting into the prefix would make it share nothing.
    if (s.prefix_tokens >= max_prompt_tokens) {
      bad("shared_prefix.tokens (" + std::to_string(s.prefix_tokens) + ") leaves no room under the prompt cap of " +
          std::to_string(max_prompt_tokens) + " tokens");
    }
  }
}

// Random token ids for prompts: the tokenizer's ordinary tokens (not control
// or unknown), and BOS first where the tokenizer adds it to text.
class PromptMaker {
 public:
  explicit PromptMaker(const Tokenizer& tok) : tok_(tok) {
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (!tok.is_special(id)) ordinary_.push_back(id);
    }
    bos_ = tok.vocab().add_bos ? tok.bos() : -1;
  }

  // Appends tokens until prompt holds n; opens with BOS when it starts empty.
  void fill(std::vector<int32_t>& prompt, int32_t n, SeededRandom& rng) const {
    if (ordinary_.empty()) throw Error(Errc::invalid_argument, "the tokenizer has no ordinary tokens to draw prompts from");
    if (prompt.empty() && bos_ >= 0 && n > 0) prompt.push_back(bos_);
    while (static_cast<int32_t>(prompt.size()) < n) {
      prompt.push_back(ordinary_[static_cast<size_t>(rng.below(static_cast<int64_t>(ordinary_.size())))]);
    }
  }

  // Text after `prompt` (empty: the text opens the prompt and gets BOS as
  // encode adds it; else it follows a prefix that already has it).
  void append_text(std::vector<int32_t>& prompt, const std::string& text) const {
    const std::vector<int32_t> ids = tok_.encode(text, /*add_special=*/prompt.empty(), /*parse_special=*/false);
    prompt.insert(prompt.end(), ids.begin(), ids.end());
  }

 private:
  const Tokenizer& tok_;
  std::vector<int32_t> ordinary_;
  int32_t bos_ = -1;
};

}  // namespace

std::vector<PlannedRequest> plan_workload(const WorkloadSpec& spec, const Tokenizer& tokenizer,
                                          int32_t max_prompt_tokens) {
  check_spec(spec, max_prompt_tokens);
  const PromptMaker maker(tokenizer);

  std::vector<TraceEntry> trace;
  int32_t n = spec.n_requests;
  if (spec.arrival.kind == ArrivalSpec::Kind::trace) {
    trace = read_workload_trace(spec.arrival.trace_path);
    const auto lines = static_cast<int32_t>(trace.size());
    n = spec.n_requests > 0 ? std::min(spec.n_requests, lines) : lines;
  }
  const std::vector<std::string> dataset =
      spec.prompts_path.empty() ? std::vector<std::string>{} : read_prompt_dataset(spec.prompts_path);

  // The prefixes come first from the seed, so they do not depend on how many
  // requests there are or how they are drawn.
  std::vector<std::vector<int32_t>> prefixes;
  if (spec.shared_prefix_fraction > 0) {
    SeededRandom rng(spec.seed, kPrefixStream);
    for (int32_t g = 0; g < spec.prefix_groups; ++g) {
      prefixes.emplace_back();
      maker.fill(prefixes.back(), spec.prefix_tokens, rng);
    }
  }

  SeededRandom arrivals(spec.seed, kArrivalStream);
  double clock_s = 0;
  std::vector<PlannedRequest> plan;
  plan.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const TraceEntry* entry = trace.empty() ? nullptr : &trace[static_cast<size_t>(i)];
    PlannedRequest req;
    req.index = i;
    switch (spec.arrival.kind) {
      case ArrivalSpec::Kind::poisson:
        clock_s += arrivals.exponential(spec.arrival.rate);  // the first request waits one gap too
        req.arrival_s = clock_s;
        break;
      case ArrivalSpec::Kind::concurrency:
        req.arrival_s = 0;  // closed loop: the clients send as soon as they can
        break;
      case ArrivalSpec::Kind::trace:
        req.arrival_s = entry->t;
        break;
    }

    // The same draws in the same order for every request, used or not, so a
    // change to one knob (the batch share) leaves the others' draws alone.
    SeededRandom rng(spec.seed, kRequestStream, static_cast<uint64_t>(i));
    const bool prefixed = rng.uniform() < spec.shared_prefix_fraction;
    const int64_t group = rng.below(std::max(spec.prefix_groups, 1));
    const bool batch = rng.uniform() < spec.batch_fraction;
    const int64_t pick = rng.below(std::max<int64_t>(static_cast<int64_t>(dataset.size()), 1));
    int32_t prompt_len = draw_length(spec.prompt_tokens, rng);
    req.max_new_tokens = draw_length(spec.output_tokens, rng);
    req.priority = batch ? Priority::batch : Priority::interactive;

    const std::string* text = nullptr;
    if (entry != nullptr) {
      if (entry->prompt_tokens > 0) prompt_len = entry->prompt_tokens;
      if (!entry->prompt.empty()) text = &entry->prompt;
      if (entry->output_tokens > 0) req.max_new_tokens = entry->output_tokens;
      if (entry->priority) req.priority = *entry->priority;
    }
    // A trace line's text stands as recorded; a dataset's text is cut to the
    // drawn length (the spec's prompt_tokens caps it).
    int32_t cap = max_prompt_tokens;
    if (text == nullptr && (entry == nullptr || entry->prompt_tokens <= 0) && !dataset.empty()) {
      text = &dataset[static_cast<size_t>(pick)];
      cap = std::min(cap, prompt_len);
    }

    if (prefixed) {
      req.prefix_group = static_cast<int32_t>(group);
      req.prompt = prefixes[static_cast<size_t>(group)];
      cap = std::max(cap, spec.prefix_tokens + 1);  // check_spec: still <= max_prompt_tokens
      prompt_len = std::max(prompt_len, spec.prefix_tokens + 1);
    }
    if (text != nullptr) {
      maker.append_text(req.prompt, *text);
    } else {
      maker.fill(req.prompt, std::min(prompt_len, cap), rng);
    }
    if (static_cast<int32_t>(req.prompt.size()) > cap) req.prompt.resize(static_cast<size_t>(cap));
    if (req.prompt.empty()) {
      throw Error(Errc::invalid_argument, "workload '" + spec.name + "': request " + std::to_string(i) +
                                              ": its prompt text encodes to no tokens");
    }
    plan.push_back(std::move(req));
  }
  return plan;
}

}  // namespace troupe
