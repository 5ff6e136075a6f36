#pragma once
// The exact support of a hybrid estimator (docs/design.md section 2.8): a sliding window of
// keys and the first `sinks` keys get the exact kernel exp(x.y), the other visible keys the
// feature map's estimate, under one normaliser (Based, LoLCATs; StreamingLLM's sinks).
#include <cstddef>
#include <string>

namespace favor {

struct HybridSupport {
    std::size_t window = 0;   // causal: i - w < j <= i; non-causal: |i - j| < w
    std::size_t sinks = 0;    // j < s (causal: and j <= i)
    // Oracle (O(L^2)): the `window` largest scores of each visible row exact instead of the
    // window; ties broken towards the lower key index.
    bool topk = false;
    bool active() const { return window != 0 || sinks != 0 || topk; }
    // The columns it adds to a variant's num_features: one score and one value row per exact
    // key an interior row holds. A causal window holds w keys (i - w < j <= i), a non-causal
    // one 2w - 1 (|i - j| < w); the top-k oracle w keys either way; sinks s.
    std::size_t columns(bool causal) const {
        const std::size_t keys = topk || causal || window == 0 ? window : 2 * window - 1;
        return keys + sinks;
    }
    // Whether key j is in query row i's sinks or window (the top-k support is per row's
    // scores: hybrid_attention.cpp). Visibility (causal j <= i) is the caller's.
    bool in_window_or_sinks(std::size_t i, std::size_t j) const {
        if (j < sinks) return true;
        if (topk) return false;
        return (i > j ? i - j : j - i) < window;
    }
    // Without a remainder (features "none") a row sees only its support. Non-causal with fewer
    // keys than queries, no sinks: rows i >= Lk + w - 1 have no key within the window, and
    // their output would be 0/0. The problem in words, or "" (causal rows always see j = i;
    // top-k always picks some key).
    std::string empty_rows_problem(bool remainder, bool causal, std::size_t L, std::size_t Lk) const {
        if (remainder || causal || sinks != 0 || topk || window == 0 || L + 1 <= Lk + window) return "";
        return "features none, window " + std::to_string(window) + " and no sinks: query rows " +
               std::to_string(Lk + window - 1) + " to " + std::to_string(L - 1) + " have no key within the window (Lk = " +
               std::to_string(Lk) + "), so their output would be 0/0; give sinks, a window of at least " +
               std::to_string(L - Lk + 1) + ", or a remainder map";
    }
};

}  // namespace favor
