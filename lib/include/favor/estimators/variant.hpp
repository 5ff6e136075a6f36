#pragma once
// A variant of an experiment: exact attention, or a feature map with a projection, under a
// unique name (docs/design.md section 5).
#include <nlohmann/json.hpp>
#include <string>

#include "favor/estimators/feature_maps.hpp"
#include "favor/estimators/fields.hpp"
#include "favor/estimators/hybrid_support.hpp"
#include "favor/estimators/projection_handle.hpp"

namespace favor {

struct Variant {
    std::string name;          // unique; defaults to <features>-<projection>, <features> for a
                               // map without a projection, or "exact"
    bool exact = false;        // exact softmax attention (timing experiments)
    FeatureMapPtr map;         // null for exact
    Projection projection;     // default iid
    // "shift": false computes the features without their max shift, phi = exp(log_scale) phi~
    // with log_scale 0 (docs/design.md section 2.3): the plain formula, as code without a
    // stabiliser has it (maps with a shift: the exp family and trig; epsilon must be 0).
    bool shift = true;
    // "window", "sinks", "support" (docs/design.md section 2.8): an exact support beside the
    // map's estimate; map is then the remainder ("none": a map with no features).
    HybridSupport hybrid;
    // Its feature columns at m in dimension d: the map's, plus one per exact key an interior
    // row holds (a key in the support costs one score and one value row, like a feature column;
    // a non-causal window of w holds 2w - 1: 2.8).
    std::size_t num_features(std::size_t m, std::size_t d, bool causal) const {
        return exact ? 0 : map->num_features(m, d) + hybrid.columns(causal);
    }
    std::string features_label() const { return exact ? "exact" : map->name(); }
    // Empty for exact and for maps that use no projection (elu, dpfp, nystrom).
    std::string projection_label() const {
        return exact || !map->uses_projection() ? "" : projection.name();
    }
    // The variant with every default filled in, as run.json records it.
    nlohmann::json resolved() const;
};

// The name uniform attention (Out_hat = mean of V) has in compare's tables (b = uniform, a
// ranking entry); no variant may take it.
inline constexpr const char* kBaselineName = "uniform";
// Appended to the name of a variant whose fitted weights were fitted on the run's own q file
// (docs/design.md section 5, "weights"): allowed, and every table row says so.
inline constexpr const char* kFittedInputSuffix = "+fitted_on_eval_input";

// A variant name is a cell of every table, unquoted: non-empty, printable (no control
// characters), no comma, double quote or '|', and not kBaselineName. variant_name_problem:
// why not ("" when it is one); check_variant_name fails at `where` with it.
std::string variant_name_problem(const std::string& name);
void check_variant_name(const std::string& name, const Field& where);

// Parses one variant object: "features" (a map, "none" with a window or sinks, or "exact"
// where allowed), "projection", "name", "epsilon", "window", "sinks", "support" and the feature
// map's own keys (its registry entry). `exact_allowed`: whether {"features": "exact"} may
// appear (timing experiments); otherwise `exact_context` says why not.
Variant parse_variant(const nlohmann::json& v, const Field& where, bool exact_allowed,
                      const std::string& exact_context);

}  // namespace favor
