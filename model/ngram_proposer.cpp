// NgramProposer: a backwards scan per suffix length. At a 4096-token window
// and 4 lengths that is a few tens of thousands of comparisons per proposal,
// far below one decode step, so no index is kept between steps.
#include "model/ngram_proposer.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace troupe {

NgramProposer::NgramProposer(NgramOptions options) : options_(options) {
  if (options_.min_n < 1 || options_.min_n > options_.max_n || options_.window < 1) {
    throw Error(Errc::invalid_argument, "n-gram proposer: need 1 <= min_n <= max_n and window >= 1, got min_n " +
                                            std::to_string(options_.min_n) + ", max_n " +
                                            std::to_string(options_.max_n) + ", window " +
                                            std::to_string(options_.window));
  }
}

int32_t NgramProposer::propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const {
  const auto len = static_cast<int64_t>(tokens.size());
  if (k <= 0) return 0;
  const int64_t lowest = std::max<int64_t>(0, len - options_.window);
  for (int64_t n = std::min<int64_t>(options_.max_n, len - 1); n >= options_.min_n; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Occurrences that end before the suffix starts' last token, newest
    // first, so the continuation has at least one token.
    for (int64_t i = len - n - 1; i >= lowest; --i) {
      if (tokens[static_cast<size_t>(i)] != suffix[0]) continue;
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n;
      const auto m = static_cast<int32_t>(std::min<int64_t>(k, len - from));
      out.insert(out.end(), tokens.begin() + from, tokens.begin() + from + m);
      return m;
    }
  }
  return 0;
}

void NgramProposer::propose(std::span<const ProposalQuery> queries, std::vector<std::vector<int32_t>>& out) {
  out.resize(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    out[i].clear();
    propose(queries[i].tokens, queries[i].k, out[i]);
  }
}

}  // namespace troupe
