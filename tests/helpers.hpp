#pragma once
// Small shared pieces of the Catch2 tests.
#include <cmath>
#include <vector>

#include "favor/tensor.hpp"

namespace favor_test {

using favor::Mat;

// A pair (x, y) as 1 x d matrices with its statistics.
struct Pair {
    Mat<double> x, y;
    double x2 = 0, y2 = 0, xy = 0;
    double z2() const { return x2 + y2 + 2 * xy; }
    double sm() const { return std::exp(xy); }
};

inline Pair make_pair(const std::vector<double>& x, const std::vector<double>& y) {
    Pair p{Mat<double>::from_shape({1, x.size()}), Mat<double>::from_shape({1, y.size()})};
    for (std::size_t c = 0; c < x.size(); ++c) {
        p.x(0, c) = x[c];
        p.y(0, c) = y[c];
        p.x2 += x[c] * x[c];
        p.y2 += y[c] * y[c];
        p.xy += x[c] * y[c];
    }
    return p;
}

// Row a . row b of W.
inline double dot_rows(const Mat<double>& W, std::size_t a, std::size_t b) {
    double s = 0;
    for (std::size_t c = 0; c < W.shape(1); ++c) s += W(a, c) * W(b, c);
    return s;
}

}  // namespace favor_test
