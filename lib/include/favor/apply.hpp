#pragma once
// `favor apply`: exact or approximate attention of given tensors, with the variant checked
// and built by the same parser and factory as a config's variants.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "favor/config.hpp"
#include "favor/tensor_io.hpp"

namespace favor {

// `favor apply` as typed on the command line, before any check.
struct ApplyRequest {
    bool exact = false, causal = false;
    std::string features, projection = "orthogonal", A, epsilon, dtype = "float64";   // as typed
    std::vector<std::string> params;   // --param KEY=VALUE: any other key of the feature map
    std::size_t m = 0;
    std::uint64_t seed = 0, trial = 0;
    int threads = 0;
};

struct ApplyOptions {
    std::optional<Variant> variant;   // empty: exact attention
    std::size_t m = 0;
    std::uint64_t seed = 0, trial = 0;
    bool causal = false;
    DType dtype = DType::float64;      // compute precision (outputs are returned as float64)
    int threads = 0;
};

// Checks a request and resolves its names: either --exact or --features with --m >= 1; the
// variant's keys (--epsilon, --A, --param KEY=VALUE) through parse_variant. Throws Error
// "apply: --FLAG: ..." (or "apply: --param KEY: ...") naming the flag.
ApplyOptions resolve_apply(const ApplyRequest& r);

// Exact or approximate attention output of every head (W drawn as a run draws it).
std::vector<Mat<double>> apply_attention(const HeadTensors& in, const ApplyOptions& opt);

}  // namespace favor
