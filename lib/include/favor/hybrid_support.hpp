#pragma once
// The exact support of a hybrid estimator (docs/design.md section 2.8): a sliding window of
// keys and the first `sinks` keys get the exact kernel exp(x.y), the other visible keys the
// feature map's estimate, under one normaliser (Based, LoLCATs; StreamingLLM's sinks).
#include <cstddef>

namespace favor {

struct HybridSupport {
    std::size_t window = 0;   // causal: i - w < j <= i; non-causal: |i - j| < w
    std::size_t sinks = 0;    // j < s (causal: and j <= i)
    // Oracle (O(L^2)): the `window` largest scores of each visible row exact instead of the
    // window; ties broken towards the lower key index.
    bool topk = false;
    bool active() const { return window != 0 || sinks != 0 || topk; }
    // The columns it adds to a variant's num_features: one score and one value row per key.
    std::size_t columns() const { return window + sinks; }
    // Whether key j is in query row i's sinks or window (the top-k support is per row's
    // scores: hybrid_attention.cpp). Visibility (causal j <= i) is the caller's.
    bool in_window_or_sinks(std::size_t i, std::size_t j) const {
        if (j < sinks) return true;
        if (topk) return false;
        return (i > j ? i - j : j - i) < window;
    }
};

}  // namespace favor
