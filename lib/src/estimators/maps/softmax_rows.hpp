#pragma once
// A max-shifted softmax over one row and its vector-Jacobian product: the parameter-free
// softmax maps (softmax_maps.cpp) and the fitted hedgehog (fitted.cpp) apply them to their rows.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace favor {

// e[0..d) = softmax(sign xs x) + epsilon, shifted by its largest entry (exact: normalised).
template <class T>
void softmax_half(const T* x, std::size_t d, double sign_xs, double epsilon, T* e) {
    double top = -HUGE_VAL, sum = 0.0;
    for (std::size_t c = 0; c < d; ++c) top = std::max(top, sign_xs * double(x[c]));
    thread_local std::vector<double> p;   // one scratch row per thread, not an allocation per row
    p.resize(d);
    for (std::size_t c = 0; c < d; ++c) sum += p[c] = std::exp(sign_xs * double(x[c]) - top);
    for (std::size_t c = 0; c < d; ++c) e[c] = T(p[c] / sum + epsilon);
}

// The softmax's vjp for one half: dz_c = p_c (G_c - sum_k G_k p_k), p = phi - epsilon; dz
// added to dz_out times `sign` (z = sign v).
template <class T>
void softmax_half_vjp(const T* G, const T* phi, std::size_t d, double epsilon, double sign, double* dz_out) {
    double gp = 0.0;
    for (std::size_t c = 0; c < d; ++c) gp += double(G[c]) * (double(phi[c]) - epsilon);
    for (std::size_t c = 0; c < d; ++c) dz_out[c] += sign * (double(phi[c]) - epsilon) * (double(G[c]) - gp);
}

}  // namespace favor
