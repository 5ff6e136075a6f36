// The gradient metrics (docs/design.md section 3).
#include "favor/metrics/gradient_metrics.hpp"

#include <cmath>
#include <limits>

namespace favor {

namespace {
template <class Fn>
void each_part(const Gradients<double>& a, const Gradients<double>& b, Fn&& fn) {
    fn(a.dQ, b.dQ), fn(a.dK, b.dK), fn(a.dV, b.dV);
}

double squared_norm(const Gradients<double>& g) {
    double s = 0;
    each_part(g, g, [&](const Mat<double>& x, const Mat<double>&) {
        for (double v : x) s += v * v;
    });
    return s;
}
}  // namespace

double grad_cosine(const Gradients<double>& exact, const Gradients<double>& approx) {
    double dot = 0;
    each_part(exact, approx, [&](const Mat<double>& e, const Mat<double>& a) {
        for (std::size_t k = 0; k < e.size(); ++k) dot += e.data()[k] * a.data()[k];
    });
    const double na = squared_norm(approx);
    return na == 0 ? 0.0 : dot / std::sqrt(squared_norm(exact) * na);
}

void TrialGradients::add(const Gradients<double>& g) {
    ++n_;
    if (n_ == 1) {
        mean_ = g;
        return;
    }
    const double inv = 1.0 / double(n_);
    auto part = [&](Mat<double>& m, const Mat<double>& x) {
        for (std::size_t k = 0; k < m.size(); ++k) {
            const double before = m.data()[k], v = x.data()[k];
            m.data()[k] = before + (v - before) * inv;
            spread_ += (v - before) * (v - m.data()[k]);
        }
    };
    part(mean_.dQ, g.dQ), part(mean_.dK, g.dK), part(mean_.dV, g.dV);
}

double grad_bias_rel(const Gradients<double>& exact, const TrialGradients& t) {
    double num = 0;
    each_part(exact, t.mean(), [&](const Mat<double>& e, const Mat<double>& m) {
        for (std::size_t k = 0; k < e.size(); ++k) num += (e.data()[k] - m.data()[k]) * (e.data()[k] - m.data()[k]);
    });
    return std::sqrt(num / squared_norm(exact));
}

double grad_bias_floor(const Gradients<double>& exact, const TrialGradients& t) {
    if (t.trials() < 2) return std::numeric_limits<double>::quiet_NaN();
    const double T = double(t.trials());
    return std::sqrt(t.spread() / (T * (T - 1)) / squared_norm(exact));
}

}  // namespace favor
