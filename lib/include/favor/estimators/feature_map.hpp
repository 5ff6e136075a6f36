#pragma once
// The feature-map interface: phi with E[phi(x) . phi(y)] = SM(x, y) = exp(x . y), and maps that
// are not estimators of SM (relu and the linear-attention baselines elu, dpfp, nystrom).
// docs/estimators.md has each one's formula, source and variance.
//
// One class per map, each in lib/src/estimators/maps/<name>.cpp, listed by one line in the registry
// (feature_registry.hpp). A map owns its config keys and their validation, its number of
// feature columns, its block kernels, its closed-form MSE, its data-dependent parameters and
// whether the fused forward may shift its keys per block.
//
// x, y are the scaled rows q / d^{1/4}, k / d^{1/4}; W (m x d) is shared by both sides.
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "favor/core/half.hpp"
#include "favor/core/tensor.hpp"

namespace favor {

enum class Side { query, key };

// One block of rows for a map's kernel. Inputs X (rows x d, leading dimension d) are scaled
// by xs on the fly (x = xs * X row). The kernel writes `out` (rows x F, leading dimension F)
// and row_log (rows):
//   Side::query (or per_row): the finished features with a per-row shift, phi(x_i) = exp(row_log[i]) out_i;
//   Side::key:   an intermediate (e.g. exponents) and row_log[i], a bound on the row's log
//                scale; finish_key_block then makes phi(y_i) = exp(shift) out_i for a shift
//                common to the rows it is given (design: docs/design.md section 2).
template <class T>
struct FeatureBlock {
    const T* X;
    std::size_t rows, d;
    double xs;
    const Mat<T>& W;   // (m, d)
    Side side;
    T* out;
    std::size_t F;
    double* row_log;
    // Finish every row here with its own shift, as for queries, whatever the side (keys
    // shifted per row where the map allows it: compute_features). `side` still says which
    // side's formula applies (asymmetric maps: gerf, saderf, nystrom).
    bool per_row = false;
    // Half-precision emulation: project_block rounds its product x W^T to this format before
    // the nonlinearity (docs/design.md section 2.6).
    Rounding rounding = Rounding::none;
    // W^T (d x m, row-major) when the caller laid it out once for many blocks (project_block
    // reads it); null: project_block lays it out itself.
    const T* Wt = nullptr;
    bool finish_rows() const { return side == Side::query || per_row; }
};

// One block of rows for FeatureMap::vjp (favor/estimators/feature_grad.hpp).
template <class T>
struct FeatureGrad;

class FeatureMap;
using FeatureMapPtr = std::shared_ptr<const FeatureMap>;

// Why a map cannot run at some sizes (FeatureMap::check_sizes): `key` is "m" (the grid's m),
// one of the map's own config keys ("nu"), or "" (the variant as a whole).
struct SizeProblem {
    std::string key;
    std::string message;
};

class FeatureMap : public std::enable_shared_from_this<FeatureMap> {
public:
    explicit FeatureMap(double epsilon) : epsilon_(epsilon) {}
    virtual ~FeatureMap() = default;

    // The config name ("positive").
    virtual std::string name() const = 0;
    // Columns of phi for m random vectors (or landmarks) in dimension d.
    virtual std::size_t num_features(std::size_t m, std::size_t d) const { return m; }
    // Whether phi is built from the random matrix W (false: W is a zero (m, d) placeholder,
    // and a variant of this map may not name a projection).
    virtual bool uses_projection() const { return true; }
    // Why the map may not run with the projection named `projection`, or "" where it may (every
    // projection, but for maclaurin, whose draws take only their seed from W: iid alone).
    virtual std::string projection_refusal(const std::string& projection) const { return ""; }
    // Whether Out_hat = D^{-1} phi(Q) (phi(K)^T V) (true) or phi(Q) (phi(K)^T V) as it is
    // (false: phi(x_i).phi(y_j) is already an attention weight, A_hat_ij; nystrom).
    virtual bool row_normalised() const { return true; }
    // Whether E[phi(x) . phi(y)] = SM(x, y).
    virtual bool estimates_softmax() const { return true; }
    // Whether m matters (false: num_features and phi ignore it, and the rows of a run repeat
    // across the grid's m values: elu, dpfp).
    virtual bool uses_m() const { return true; }
    // Whether phi(x).phi(y) is a kernel value of the pair, which kernel_mse and the kernel
    // experiment compare with SM (false: an attention weight fitted to whole sequences,
    // nystrom; no kernel_mse, no kernel experiment).
    virtual bool is_kernel() const { return true; }
    // Whether causal (prefix-sum) attention with this map is a causal model (false: nystrom,
    // whose landmarks average over the whole sequence).
    virtual bool supports_causal() const { return true; }
    // Whether the map can run with m random vectors or landmarks in dimension d, for L queries
    // and Lk keys (0: not known yet); the problem otherwise.
    virtual std::optional<SizeProblem> check_sizes(std::size_t m, std::size_t d, std::size_t L,
                                                   std::size_t Lk) const {
        return std::nullopt;
    }
    // Matrix-product flops of both feature maps for L queries and Lk keys (the timing
    // experiment's count): the products X W^T, or the map's own.
    virtual double feature_flops(std::size_t L, std::size_t Lk, std::size_t m, std::size_t d) const {
        return uses_projection() ? 2.0 * double(L + Lk) * double(m) * double(d) : 0.0;
    }
    // The parameters as run.json records them (epsilon, and the map's own).
    virtual nlohmann::json params() const { return {{"epsilon", epsilon_}}; }
    // The map for head `head` of the inputs (maps fitted per head: their weights for that
    // head; Estimator::for_inputs calls it); itself for every other map. Throws Error for a
    // head the map has no weights for.
    virtual FeatureMapPtr for_head(std::size_t head) const { return shared_from_this(); }
    // Why the map cannot run on inputs of `heads` heads (fitted weights for another number of
    // heads), checked with check_sizes before any work.
    virtual std::optional<SizeProblem> check_heads(std::size_t heads) const { return std::nullopt; }
    // The sha256 of the q file the map's weights were fitted on ("" for maps not fitted to a
    // capture): a run on that file says fitted_on_eval_input (docs/design.md section 5).
    virtual std::string fitted_on_q_sha256() const { return ""; }
    // Whether resolve() / fit() depend on the inputs (oprf's A*, nystrom's landmarks).
    virtual bool data_dependent() const { return false; }
    // The map with its data-dependent parameters fixed for the scaled queries X (L, d) and
    // keys Y (Lk, d); itself where it has none.
    virtual FeatureMapPtr resolve(const Mat<double>& X, const Mat<double>& Y) const { return shared_from_this(); }
    // resolve() for a run with m random vectors or landmarks (Estimator::for_inputs calls
    // this one); maps whose fit depends on m (nystrom) override it.
    virtual FeatureMapPtr fit(const Mat<double>& X, const Mat<double>& Y, std::size_t m) const { return resolve(X, Y); }
    // Closed-form MSE of phi(x) . phi(y) as an estimate of SM(x, y) with m iid random
    // vectors, from x2 = |x|^2, y2 = |y|^2, xy = x . y; nullopt where none is known or where
    // it depends on more than these three numbers (then see pair_mse_rows).
    virtual std::optional<double> pair_mse(double x2, double y2, double xy, std::size_t m, std::size_t d) const {
        return std::nullopt;
    }
    // The same closed form for every pair (x_i, y_j) of the scaled rows X (L, d) and Y (Lk, d),
    // as a function of (i, j, x_i . y_j), prepared once for these rows (per-row terms); an
    // empty function where the map has none. The default calls pair_mse with the row norms;
    // maps whose MSE depends on the vectors themselves (sderf, saderf) override it.
    using PairMse = std::function<double(std::size_t i, std::size_t j, double xy)>;
    virtual PairMse pair_mse_rows(const Mat<double>& X, const Mat<double>& Y, std::size_t m) const;
    // Whether keys may be finished with one shift per block of rows, the blocks rescaled to a
    // common shift afterwards (favor_forward). False where the result is not linear in the
    // shifted values (epsilon added after a shifted exp).
    virtual bool blockwise_key_shift() const { return true; }

    // The block kernels (contract at FeatureBlock).
    virtual void block(const FeatureBlock<float>& b) const = 0;
    virtual void block(const FeatureBlock<double>& b) const = 0;
    // out (rows x F) from block()'s key intermediate and row_log, for one common `shift`.
    virtual void finish_key_block(float* out, std::size_t F, std::size_t rows, const double* row_log, double shift) const = 0;
    virtual void finish_key_block(double* out, std::size_t F, std::size_t rows, const double* row_log, double shift) const = 0;

    // The vector-Jacobian product of the features for one block (contract at FeatureGrad,
    // favor/estimators/feature_grad.hpp); fitted parameters are held fixed. Throws Error ("no gradient",
    // with gradient_refusal()) where the map as configured has none: the default.
    virtual void vjp(const FeatureGrad<float>& g) const;
    virtual void vjp(const FeatureGrad<double>& g) const;
    // Why the map as configured has no gradient, or "" when vjp gives one; callers check it
    // before any work (favor apply --grad writes nothing when it is not ""). The default: no
    // Jacobian is implemented; a map that overrides vjp overrides this too.
    virtual std::string gradient_refusal() const { return "favor implements none for this map"; }

    // Added to every stabilised feature before the normalising factor, as the official code
    // does (it uses 1e-6); it biases the estimate, so it is 0 unless asked for.
    double epsilon() const { return epsilon_; }

private:
    double epsilon_;
};

// Implements the float and double kernels of FeatureMap with the templates of Derived:
// block_impl<T>(const FeatureBlock<T>&) and finish_impl<T>(T*, F, rows, row_log, shift).
template <class Derived>
class FeatureMapKernels : public FeatureMap {
public:
    using FeatureMap::FeatureMap;
    void block(const FeatureBlock<float>& b) const override { self().block_impl(b); }
    void block(const FeatureBlock<double>& b) const override { self().block_impl(b); }
    void finish_key_block(float* o, std::size_t F, std::size_t r, const double* l, double s) const override {
        self().finish_impl(o, F, r, l, s);
    }
    void finish_key_block(double* o, std::size_t F, std::size_t r, const double* l, double s) const override {
        self().finish_impl(o, F, r, l, s);
    }

private:
    const Derived& self() const { return static_cast<const Derived&>(*this); }
};

// The kernels of a map whose block() finishes the features on both sides (row_log = 0, or each
// row's own shift; no key finishing) and that has a gradient: Derived defines block_impl and
// vjp_impl (a template over T taking FeatureGrad<T>; elu, relu, dpfp, taylor2, hedgehog, the
// softmax and fitted maps, and with per-row shifts poisson, geometric, maclaurin).
template <class Derived>
class FinishedMapKernels : public FeatureMapKernels<Derived> {
public:
    using FeatureMapKernels<Derived>::FeatureMapKernels;
    template <class T>
    void finish_impl(T*, std::size_t, std::size_t, const double*, double) const {}
    void vjp(const FeatureGrad<float>& g) const override { static_cast<const Derived&>(*this).vjp_impl(g); }
    void vjp(const FeatureGrad<double>& g) const override { static_cast<const Derived&>(*this).vjp_impl(g); }
    std::string gradient_refusal() const override { return ""; }
};

// out (rows x m, leading dimension F) = xs X W^T: the product every map starts from, rounded
// as b.rounding says.
template <class T>
void project_block(const FeatureBlock<T>& b);
// W^T (d x m, row-major) for FeatureBlock::Wt.
template <class T>
std::vector<T> transposed(const Mat<T>& W);

}  // namespace favor
