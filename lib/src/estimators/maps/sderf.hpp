#pragma once
// sderf's map (sderf.cpp), shared with `dark` (dark.cpp): DARK's importance-sampled positive
// features with Sigma fitted to the moments are sderf with Sigma = I - 4A (docs/estimators.md).
#include "exp_family.hpp"

namespace favor {

// Which names the map answers to: "sderf" (A, M) or "dark" (Sigma = I - 4A, C = M).
enum class SderfNames { sderf, dark };
FeatureMapPtr make_sderf_map(const FieldObject& variant, double epsilon, SderfNames names);

}  // namespace favor
