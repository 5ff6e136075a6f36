#pragma once
// `favor apply`: exact or approximate attention of given tensors, with the variant checked
// and built by the same parser and factory as a config's variants.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "favor/attention/favor_forward.hpp"
#include "favor/estimators/estimator.hpp"
#include "favor/experiments/config.hpp"
#include "favor/io/tensor_io.hpp"

namespace favor {

// `favor apply` as typed on the command line, before any check; an absent flag is nullopt
// (an empty value is an error, not an absent flag).
struct ApplyRequest {
    bool exact = false, causal = false;
    std::optional<std::string> features, projection, m, seed, trial, epsilon, epsilon_after, A, dtype, threads;
    std::optional<std::string> window, sinks, support;   // the hybrid keys (docs/design.md 2.8)
    std::vector<std::string> params;   // --param KEY=VALUE: the map's own keys (dpfp's nu, ...)
};

struct ApplyOptions {
    std::optional<Variant> variant;   // empty: exact attention
    std::size_t m = 0;
    std::uint64_t seed = 0, trial = 0;
    bool causal = false;
    DType dtype = DType::float64;      // compute precision (outputs are returned as float64)
    int threads = 0;                   // as given (0: all hardware threads)
    std::size_t head = 0;              // the head being computed (a fitted map's weights for it);
                                       // the loops over heads set it
};

// Checks a request and resolves its names: either --exact or --features with --m in
// 1..kMaxM (--m only for maps that use m); --seed, --trial unsigned 64-bit; --threads >= 0;
// the variant's keys (--projection, default orthogonal for maps that use one and take it (maclaurin: iid), --epsilon,
// --epsilon-after, --A, --param KEY=VALUE) through parse_variant; --causal only with maps
// that have a causal form. Throws Error "apply: --FLAG: ..." naming the flag.
ApplyOptions resolve_apply(const ApplyRequest& r);

// Throws Error "apply: --m: ..." (or --features, --param KEY) when the map cannot run with
// d-dimensional rows, L queries and Lk keys (nystrom: m <= L), or on `heads` heads (fitted
// weights for another number of heads; 0: not checked here).
void check_apply_sizes(const ApplyOptions& opt, std::size_t d, std::size_t L, std::size_t Lk, std::size_t heads);


// Exact or approximate attention output of every head (W drawn as a run draws it). Throws
// Error "apply: --m: ..." when the map cannot run at these sizes (nystrom: m <= L).
std::vector<Mat<double>> apply_attention(const HeadTensors& in, const ApplyOptions& opt);

// One head's output from q, k, v already in the compute type of opt.dtype (double for float64,
// float otherwise): apply_attention casts each head to it and calls this (the Python module
// converts its arrays to it directly). No size checks (check_apply_sizes).
template <class T>
Mat<double> apply_head(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const ApplyOptions& opt);
// The same in the compute type (what the Python module hands to numpy without widening), on
// views of q, k, v (the module's C-contiguous arrays, read in place: T given,
// apply_head_native<T>(...)); the half dtypes round copies of them.
template <class T>
Mat<T> apply_head_native(MatView<T> Q, MatView<T> K, MatView<T> V, const ApplyOptions& opt);

// A head's forward with what its backward needs kept, as autograd keeps it between the passes
// (favor.torch, docs/design.md 9.2): the fitted estimator and favor_forward_saved's state, whose
// out is apply_head_native's output bit for bit; favor_backward_saved(est, Q, K, V, G, state,
// causal) then gives `apply --grad`'s gradients bit for bit (favor_backward is the same passes).
template <class T>
struct SavedHead {
    Estimator<T> est;
    ForwardState<T> state;
};
// Whether apply_head_saved serves opt: a feature map with a gradient, no exact support (window,
// sinks), float32 or float64, the features shifted (with "shift": false the fused forward's
// numbers are not apply_head_native's).
bool saves_head(const ApplyOptions& opt);
// Head opt.head's forward from `drawn` (make_estimator for opt, drawn once for every head: W does
// not depend on the head), fitted to this head's Q and K. opt as saves_head accepts it.
template <class T>
SavedHead<T> apply_head_saved(const Estimator<T>& drawn, MatView<T> Q, MatView<T> K, MatView<T> V,
                              const ApplyOptions& opt);

// Where an output is not finite, and the likely reason.
struct NonfiniteReport {
    std::size_t count = 0;          // NaN / Inf entries over all heads
    std::size_t head = 0, row = 0;  // the first one (head in C order of the leading dims)
    std::string cause;
    // "apply: 12 of 64 output entries are not finite (first: head 0, row 3): <cause>" (`what`:
    // "output", or the gradient's name: "dq")
    std::string message(std::size_t total, const std::string& what = "output") const;
};
// The count and the first (head, row) of the non-finite entries of `heads` (no cause).
NonfiniteReport locate_nonfinite(const std::vector<Mat<double>>& heads);
// nullopt when every entry is finite.
std::optional<NonfiniteReport> find_nonfinite(const HeadTensors& in, const std::vector<Mat<double>>& out,
                                              const ApplyOptions& opt);

}  // namespace favor
