#include "favor/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "favor/attention.hpp"
#include "favor/blas.hpp"
#include "favor/parallel.hpp"
#include "favor/vmath.hpp"

namespace favor {

template <class T>
double output_mse(const Mat<double>& exact, const Mat<T>& approx) {
    const double* a = exact.data();
    const T* b = approx.data();
    double s = 0.0;
    for (std::size_t k = 0, n = exact.size(); k < n; ++k) {
        const double e = a[k] - double(b[k]);
        s += e * e;
    }
    return s / double(exact.size());
}

template <class T>
std::size_t count_nonfinite(const Mat<T>& a) {
    std::size_t n = 0;
    for (const T& v : a) n += std::isfinite(v) ? 0 : 1;
    return n;
}

FeatureMap::PairMse kernel_theory(const FeatureMapPtr& f, const Mat<double>& X, const Mat<double>& Y,
                                  std::size_t m) {
    return f->pair_mse_rows(X, Y, m);
}

PairwiseRequest PairwiseRequest::of(const std::vector<std::string>& columns, bool causal, const FeatureMapPtr& map,
                                    std::size_t m, const Mat<double>& X, const Mat<double>& Y) {
    auto has = [&](const char* c) { return std::find(columns.begin(), columns.end(), c) != columns.end(); };
    PairwiseRequest req;
    req.attention_mse = has("attention_mse");
    req.attention_tv = has("attention_tv");
    req.attention_kl = has("attention_kl");
    req.kernel_mse = has("kernel_mse") && (!map || map->is_kernel());
    req.negative_fraction = has("negative_fraction");
    req.causal = causal;
    req.row_normalised = !map || map->row_normalised();
    if (map && has("kernel_mse_theory")) req.theory = kernel_theory(map, X, Y, m);
    return req;
}

const std::vector<MetricInfo>& metric_table() {
    using S = MetricInfo::Source;
    using Sum = MetricInfo::Summary;
    static const std::vector<MetricInfo> t = {
        {"output_mse", "", "mean over i, c of (Out - Out_hat)^2 (Performer Fig. 4)", S::output, false, Sum::stats, false, "", true},
        {"output_rel_error", "", "||Out - Out_hat||_F / ||Out||_F", S::output, false, Sum::stats, false, "", true},
        {"attention_mse", "", "mean over i, j of (A - A_hat)^2", S::pairwise, false, Sum::stats, false, "", true},
        {"attention_tv", "", "mean over rows of the total variation (1/2) sum_j |A_ij - A_hat_ij|", S::pairwise, false, Sum::stats, false, "", true},
        {"attention_kl", "nats", "mean over rows of KL(A_i || A_hat_i); blank where some A_hat_ij <= 0", S::pairwise, false, Sum::stats, false, "", true},
        {"kernel_mse", "", "mean over i, j of (SM(x_i, y_j) - phi(x_i).phi(y_j))^2", S::pairwise, false, Sum::stats, false, "", false},
        {"kernel_mse_theory", "", "mean over i, j of the map's closed-form MSE with iid W", S::theory, false, Sum::value, false, "kernel_mse", false},
        {"negative_fraction", "", "share of A_hat entries < 0 (or NaN)", S::pairwise, false, Sum::stats, false, "", false},
        {"nonfinite", "count", "NaN or Inf entries of Out_hat (summed over heads)", S::output, true, Sum::stats, true, "", false},
        {"overflow_fraction", "", "share of the entries of phi(Q), phi(K) and the stored phi(K)^T [V, 1] (non-causal) that are +-Inf "
         "(after rounding with float16/bfloat16, where it is always present)", S::output, false, Sum::stats, false, "", false},
        {"seconds", "s", "wall time of the estimator (not deterministic; summed over heads)", S::clock, true, Sum::stats, false, "", false},
    };
    return t;
}

const MetricInfo* find_metric(const std::string& name) {
    for (const auto& m : metric_table())
        if (name == m.name) return &m;
    return nullptr;
}

std::vector<std::string> metric_names() {
    std::vector<std::string> n;
    for (const auto& m : metric_table()) n.push_back(m.name);
    return n;
}

std::vector<std::string> metric_columns(const std::vector<std::string>& requested) {
    auto asked = [&](const std::string& c) { return std::find(requested.begin(), requested.end(), c) != requested.end(); };
    std::vector<std::string> cols;
    for (const auto& m : metric_table())
        if (m.always || asked(m.name) || (*m.implied_by && asked(m.implied_by))) cols.push_back(m.name);
    return cols;
}

namespace {
std::vector<std::string> columns_summarised_as(const std::vector<std::string>& columns, MetricInfo::Summary s) {
    std::vector<std::string> out;
    for (const auto& c : columns) {
        const MetricInfo* m = find_metric(c);
        if (m && m->summary == s) out.push_back(c);
    }
    return out;
}
}  // namespace

std::vector<std::string> stat_columns(const std::vector<std::string>& columns) {
    return columns_summarised_as(columns, MetricInfo::Summary::stats);
}
std::vector<std::string> value_columns(const std::vector<std::string>& columns) {
    return columns_summarised_as(columns, MetricInfo::Summary::value);
}

namespace {
struct BlockSums {
    double attention = 0, tv = 0, kl = 0, kernel = 0, theory = 0, negative = 0, pairs = 0, rows = 0;
    bool kl_undefined = false;   // some A_hat entry <= 0 (or NaN): KL(A || A_hat) is infinite
    void add(const BlockSums& o) {
        attention += o.attention, tv += o.tv, kl += o.kl, kernel += o.kernel, theory += o.theory;
        negative += o.negative, pairs += o.pairs, rows += o.rows;
        kl_undefined = kl_undefined || o.kl_undefined;
    }
};

// The attention metrics of one row: the exact softmax row A (from the scores s, max
// subtracted, in log space for the KL) against A_hat_j = k_j w_j / sum_j k_j w_j, with
// w_j = exp(lk_j - P_i) the key log scales relative to the largest one row i sees (keys are
// shifted per row: docs/design.md section 2.3; w null: all equal, w_j = 1), or, for maps
// that are not row-normalised (nystrom), the row k itself with the shifts lq + lk_j undone.
// `a`, `kw` are scratch.
void attention_row(const double* s, const double* k, std::size_t n, const PairwiseRequest& req, double lq,
                   const double* lk, const double* w, std::vector<double>& a, std::vector<double>& kw,
                   BlockSums& acc) {
    a.assign(s, s + n);
    const double mx = max_of(a.data(), n);
    exp_shifted(a.data(), n, mx);
    const double z = sum_of(a.data(), n), inv_z = 1.0 / z, log_z = std::log(z);
    const double* kr = k;
    if (req.row_normalised && w) {
        kw.resize(n);
        for (std::size_t j = 0; j < n; ++j) kw[j] = k[j] * w[j];
        kr = kw.data();
    }
    const double inv_d = req.row_normalised ? 1.0 / sum_of(kr, n) : 1.0;
    double tv = 0, kl = 0;
    for (std::size_t j = 0; j < n; ++j) {
        const double ah = req.row_normalised ? kr[j] * inv_d : k[j] * std::exp(lq + lk[j]), aj = a[j] * inv_z;
        const double e = aj - ah;
        acc.attention += e * e;
        tv += std::fabs(e);
        // NaN counts as negative: not >= 0, not a valid weight (docs/design.md section 3).
        acc.negative += ah >= 0.0 ? 0.0 : 1.0;
        if (!req.attention_kl) continue;
        if (!(ah > 0.0)) acc.kl_undefined = true;
        else if (aj > 0.0) kl += aj * ((s[j] - mx - log_z) - std::log(ah));
    }
    acc.tv += 0.5 * tv;
    acc.kl += kl;
    acc.rows += 1.0;
}

// phi(x).phi(y) = exp(lq + lk_j) K_ij against SM = exp(s_ij), undone in log space so it
// cannot overflow.
void kernel_row(const double* s, const double* k, std::size_t n, double lq, const double* lk, BlockSums& acc) {
    for (std::size_t j = 0; j < n; ++j) {
        const double kv = k[j];
        const double est = kv == 0.0 ? 0.0 : std::copysign(std::exp(lq + lk[j] + std::log(std::fabs(kv))), kv);
        const double e = std::exp(s[j]) - est;
        acc.kernel += e * e;
    }
}
}  // namespace

PairwiseResult pairwise_metrics(const Mat<double>& X, const Mat<double>& Y, const Features<double>& fq,
                                const Features<double>& fk, const PairwiseRequest& req, int threads) {
    PairwiseResult res;
    if (!req.any()) return res;
    const std::size_t L = X.shape(0), Lk = Y.shape(0), d = X.shape(1), F = fq.phi.shape(1);
    const std::size_t b = block_rows(Lk);
    const std::size_t nblocks = (L + b - 1) / b;
    std::vector<BlockSums> sums(nblocks);
    const bool need_attention = req.attention_mse || req.attention_tv || req.attention_kl || req.negative_fraction;
    // A_hat_ij = K_ij w_j / sum_j K_ij w_j with w_j = exp(lk_j - P_i), P_i the largest key log
    // scale row i sees (keys are shifted per row: docs/design.md section 2.3). pmax: P_i.
    const std::vector<double>& lk = fk.log_scale;
    const bool key_scales = std::any_of(lk.begin(), lk.end(), [&](double v) { return v != lk[0]; });
    std::vector<double> pmax(L, 0.0);
    if (key_scales) {
        const double all = max_of(lk.data(), Lk);
        double p = -std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < L; ++i) pmax[i] = req.causal && i < Lk ? (p = std::max(p, lk[i])) : req.causal ? p : all;
    }

    parallel_for(nblocks, threads, [&](std::size_t blk) {
        const std::size_t r0 = blk * b, rows = std::min(b, L - r0);
        const std::size_t cols = req.causal ? std::min(Lk, r0 + rows) : Lk;
        std::vector<double> S(rows * cols), K(rows * cols), scratch, kw_scratch;
        gemm<double>(false, true, rows, cols, d, 1.0, X.data() + r0 * d, d, Y.data(), d, 0.0, S.data(), cols);
        gemm<double>(false, true, rows, cols, F, 1.0, fq.phi.data() + r0 * F, F, fk.phi.data(), F, 0.0, K.data(), cols);
        BlockSums& acc = sums[blk];
        std::vector<double> w;   // w_j for the current P (wp)
        double wp = std::numeric_limits<double>::quiet_NaN();
        for (std::size_t i = 0; i < rows; ++i) {
            const std::size_t gi = r0 + i;
            const std::size_t n = req.causal ? std::min(cols, gi + 1) : cols;
            const double* s = S.data() + i * cols;
            const double* k = K.data() + i * cols;
            acc.pairs += double(n);
            if (need_attention) {
                if (key_scales && !(pmax[gi] == wp)) {   // w_j = exp(lk_j - P_i), kept while P_i is
                    wp = pmax[gi];
                    w.resize(cols);
                    for (std::size_t j = 0; j < cols; ++j) w[j] = std::exp(lk[j] - wp);
                }
                attention_row(s, k, n, req, fq.log_scale[gi], lk.data(), key_scales ? w.data() : nullptr, scratch,
                              kw_scratch, acc);
            }
            if (req.kernel_mse) kernel_row(s, k, n, fq.log_scale[gi], fk.log_scale.data(), acc);
            if (req.theory)
                for (std::size_t j = 0; j < n; ++j) acc.theory += req.theory(gi, j, s[j]);
        }
    });

    BlockSums total;
    for (const BlockSums& s : sums) total.add(s);   // in block order
    if (req.attention_mse) res.attention_mse = total.attention / total.pairs;
    if (req.attention_tv) res.attention_tv = total.tv / total.rows;
    if (req.attention_kl && !total.kl_undefined) res.attention_kl = total.kl / total.rows;
    if (req.negative_fraction) res.negative_fraction = total.negative / total.pairs;
    if (req.kernel_mse) res.kernel_mse = total.kernel / total.pairs;
    if (req.theory) res.kernel_mse_theory = total.theory / total.pairs;
    return res;
}

template <class T>
double output_rel_error(const Mat<double>& exact, const Mat<T>& approx) {
    double num = 0.0, den = 0.0;
    for (std::size_t k = 0, n = exact.size(); k < n; ++k) {
        const double e = exact.data()[k] - double(approx.data()[k]);
        num += e * e;
        den += exact.data()[k] * exact.data()[k];
    }
    return std::sqrt(num / den);
}

template double output_rel_error<float>(const Mat<double>&, const Mat<float>&);
template double output_rel_error<double>(const Mat<double>&, const Mat<double>&);
template double output_mse<float>(const Mat<double>&, const Mat<float>&);
template double output_mse<double>(const Mat<double>&, const Mat<double>&);
template std::size_t count_nonfinite<float>(const Mat<float>&);
template std::size_t count_nonfinite<double>(const Mat<double>&);

}  // namespace favor
