#pragma once
// Pieces of the hybrid tests (test_hybrid_attention.cpp, test_hybrid_fast.cpp): a variant from
// its config JSON, and its estimator fitted to (Q, K) with the tests' seed 7.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "favor/estimators/estimator.hpp"
#include "favor/estimators/fields.hpp"
#include "favor/estimators/variant.hpp"

namespace favor_test {

inline favor::Variant variant_of(nlohmann::json v) { return favor::parse_variant(v, favor::Field{"test", ""}, false, ""); }

template <class T>
favor::Estimator<T> estimator_of(const nlohmann::json& v, std::size_t m, const favor::Mat<T>& Q, const favor::Mat<T>& K,
                                 std::uint64_t trial = 0) {
    return favor::make_estimator<T>(variant_of(v), m, Q.shape(1), 7, trial).for_inputs(Q, K);
}

}  // namespace favor_test
