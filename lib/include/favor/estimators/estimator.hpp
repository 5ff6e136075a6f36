#pragma once
// The one factory from a config variant to a ready estimator: the feature map and the
// random matrix W for (seed, projection, m, d, trial), with data-dependent parameters fitted
// to the inputs. Used by every runner, `favor apply` and the benchmark.
#include <cstdint>

#include "favor/core/half.hpp"
#include "favor/core/tensor.hpp"
#include "favor/estimators/hybrid_support.hpp"
#include "favor/estimators/variant.hpp"

namespace favor {

template <class T>
struct Estimator {
    FeatureMapPtr map;
    Mat<T> W;              // (m, d) in the compute precision
    bool fitted = false;   // data-dependent parameters fixed (for_inputs)
    // Half-precision emulation (docs/design.md section 2.6): W, the features, phiK^T [V, 1]
    // and the output rounded to float16 / bfloat16 (T = float); none otherwise.
    Rounding rounding = Rounding::none;
    bool shift = true;     // the variant's "shift" (false: features without their max shift)
    // The variant's exact support ("window", "sinks", "support": docs/design.md section 2.8);
    // active: the output is hybrid_attention's, map the remainder.
    HybridSupport hybrid{};

    // This estimator with the map's data-dependent parameters (oprf's A*, nystrom's
    // landmarks) fixed for queries Q (L, d) and keys K (Lk, d), before scaling by d^{-1/4},
    // and its per-head weights (fitted maps) those of head `head` of the inputs.
    Estimator for_inputs(MatView<T> Q, MatView<T> K, std::size_t head = 0) const;
    // The map, checked to be ready for these inputs (throws std::logic_error otherwise).
    const FeatureMap& ready_map() const;
};

// W drawn as draw_projection(v.projection, m, d, seed, trial) (docs/design.md section 7),
// then rounded as `rounding` says (half dtypes: T = float).
template <class T>
Estimator<T> make_estimator(const Variant& v, std::size_t m, std::size_t d, std::uint64_t seed,
                            std::uint64_t trial, Rounding rounding = Rounding::none);

}  // namespace favor
