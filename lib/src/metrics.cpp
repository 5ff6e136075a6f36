#include "favor/metrics.hpp"

#include <algorithm>
#include <cmath>
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

std::function<double(double, double, double)> kernel_theory(const FeatureMapPtr& f, std::size_t m,
                                                             std::size_t d) {
    if (!f->pair_mse(1.0, 1.0, 0.0, m, d)) return {};
    return [f, m, d](double x2, double y2, double xy) { return *f->pair_mse(x2, y2, xy, m, d); };
}

PairwiseRequest PairwiseRequest::of(const std::vector<std::string>& columns, bool causal, const FeatureMapPtr& map,
                                    std::size_t m, std::size_t d) {
    auto has = [&](const char* c) { return std::find(columns.begin(), columns.end(), c) != columns.end(); };
    PairwiseRequest req;
    req.attention_mse = has("attention_mse");
    req.kernel_mse = has("kernel_mse");
    req.negative_fraction = has("negative_fraction");
    req.causal = causal;
    if (has("kernel_mse_theory")) req.theory = kernel_theory(map, m, d);
    return req;
}

const std::vector<MetricInfo>& metric_table() {
    using S = MetricInfo::Source;
    using Sum = MetricInfo::Summary;
    static const std::vector<MetricInfo> t = {
        {"output_mse", "", "mean over i, c of (Out - Out_hat)^2 (Performer Fig. 4)", S::output, false, Sum::stats, false, ""},
        {"attention_mse", "", "mean over i, j of (A - A_hat)^2", S::pairwise, false, Sum::stats, false, ""},
        {"kernel_mse", "", "mean over i, j of (SM(x_i, y_j) - phi(x_i).phi(y_j))^2", S::pairwise, false, Sum::stats, false, ""},
        {"kernel_mse_theory", "", "mean over i, j of the map's closed-form MSE with iid W", S::theory, false, Sum::value, false, "kernel_mse"},
        {"negative_fraction", "", "share of A_hat entries < 0", S::pairwise, false, Sum::stats, false, ""},
        {"nonfinite", "count", "NaN or Inf entries of Out_hat (summed over heads)", S::output, true, Sum::stats, true, ""},
        {"seconds", "s", "wall time of the estimator (not deterministic; summed over heads)", S::clock, true, Sum::stats, false, ""},
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
    double attention = 0, kernel = 0, theory = 0, negative = 0, pairs = 0;
};
}  // namespace

PairwiseResult pairwise_metrics(const Mat<double>& X, const Mat<double>& Y,
                                const Features<double>& fq, const Features<double>& fk,
                                const PairwiseRequest& req, int threads) {
    PairwiseResult res;
    if (!req.any()) return res;
    const std::size_t L = X.shape(0), Lk = Y.shape(0), d = X.shape(1), F = fq.phi.shape(1);
    const std::vector<double> x2 = row_norms2(X), y2 = row_norms2(Y);
    const std::size_t b = block_rows(Lk);
    const std::size_t nblocks = (L + b - 1) / b;
    std::vector<BlockSums> sums(nblocks);
    const bool need_attention = req.attention_mse || req.negative_fraction;
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
        std::vector<double> S(rows * cols), K(rows * cols);
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
                // A: exact softmax row (max subtracted); A_hat: K row over its sum D_i.
                std::vector<double> a(s, s + n);
                exp_shifted(a.data(), n, max_of(a.data(), n));
                const double inv_z = 1.0 / sum_of(a.data(), n);
                std::vector<double> kw;
                if (key_scales) {
                    if (!(pmax[gi] == wp)) {
                        wp = pmax[gi];
                        w.resize(cols);
                        for (std::size_t j = 0; j < cols; ++j) w[j] = std::exp(lk[j] - wp);
                    }
                    kw.resize(n);
                    for (std::size_t j = 0; j < n; ++j) kw[j] = k[j] * w[j];
                }
                const double* kr = key_scales ? kw.data() : k;
                const double inv_d = 1.0 / sum_of(kr, n);
                for (std::size_t j = 0; j < n; ++j) {
                    const double ah = kr[j] * inv_d;
                    const double e = a[j] * inv_z - ah;
                    acc.attention += e * e;
                    // NaN counts as negative: not >= 0 (docs/design.md section 3).
                    acc.negative += ah >= 0.0 ? 0.0 : 1.0;
                }
            }
            if (req.kernel_mse) {
                // phi(x).phi(y) = exp(lq_i + lk_j) K_ij, undone in log space so it cannot overflow.
                const double lq = fq.log_scale[gi];
                for (std::size_t j = 0; j < n; ++j) {
                    const double kv = k[j];
                    const double est = kv == 0.0 ? 0.0
                                                 : std::copysign(std::exp(lq + fk.log_scale[j] + std::log(std::fabs(kv))), kv);
                    const double e = std::exp(s[j]) - est;
                    acc.kernel += e * e;
                }
            }
            if (req.theory)
                for (std::size_t j = 0; j < n; ++j) acc.theory += req.theory(x2[gi], y2[j], s[j]);
        }
    });

    BlockSums total;
    for (const BlockSums& s : sums) {
        total.attention += s.attention;
        total.kernel += s.kernel;
        total.theory += s.theory;
        total.negative += s.negative;
        total.pairs += s.pairs;
    }
    if (req.attention_mse) res.attention_mse = total.attention / total.pairs;
    if (req.negative_fraction) res.negative_fraction = total.negative / total.pairs;
    if (req.kernel_mse) res.kernel_mse = total.kernel / total.pairs;
    if (req.theory) res.kernel_mse_theory = total.theory / total.pairs;
    return res;
}

template double output_mse<float>(const Mat<double>&, const Mat<float>&);
template double output_mse<double>(const Mat<double>&, const Mat<double>&);
template std::size_t count_nonfinite<float>(const Mat<float>&);
template std::size_t count_nonfinite<double>(const Mat<double>&);

}  // namespace favor
