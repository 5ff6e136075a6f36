#pragma once
// The "timing" experiment's pieces that tests check directly: counted flops and the
// crossover of two timing curves. The experiment itself is run_timing_experiment
// (lib/src/experiments/experiment_parts.hpp), reached through run_experiment.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/hybrid_support.hpp"

namespace favor {

// Flops counted for timing (2 M N K per matrix product; exp, max, sums and divisions are
// not counted). L queries, Lk keys, head dim d, value dim dv.
// exact: Q K^T and A V over the visible pairs: 2 (d + dv) pairs, pairs = L Lk, or
//        sum_i min(i + 1, Lk) when causal.
double exact_attention_flops(std::size_t L, std::size_t Lk, std::size_t d, std::size_t dv, bool causal);
// FAVOR: the feature maps' products f.feature_flops (X W^T and Y W^T, 2 (L + Lk) m d, for
// maps with a projection; 0 for elu and dpfp; nystrom's own), phiK^T [V, 1] (2 Lk F (dv + 1))
// and phiQ (phiK^T [V, 1]) (2 L F (dv + 1)), F = f.num_features(m, d). Causal runs are counted
// the same (the nominal work of the estimator, not of the prefix-sum schedule).
double favor_attention_flops(const FeatureMap& f, std::size_t L, std::size_t Lk, std::size_t d,
                             std::size_t dv, std::size_t m);
// A hybrid's exact support (docs/design.md 2.8) on top of its remainder's favor_attention_flops:
// 2 (d + dv) per pair of E(i) (the visible sinks and window keys, L = Lk); the top-k oracle
// every visible pair (exact_attention_flops); 0 without a support.
double support_flops(const HybridSupport& h, std::size_t L, std::size_t d, std::size_t dv, bool causal);

// The smallest L from which `fast` stays below `slow` for every larger L where both were
// measured (nullopt where it never does). Ls ascending; entries without a value are skipped.
std::optional<std::size_t> crossover_L(const std::vector<std::size_t>& Ls,
                                       const std::vector<std::optional<double>>& fast,
                                       const std::vector<std::optional<double>>& slow);

// Columns of timing.csv, in order (docs/design.md section 6, then phases and status);
// backward (the config's "backward"): backward_s and backward_ratio before status.
const std::vector<std::string>& timing_columns(bool backward = false);

}  // namespace favor
