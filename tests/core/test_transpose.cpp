// tiles::transpose (lib/src/core/transpose.hpp): equals the element-by-element transpose for
// every size around the SIMD block (edges in rows and columns), float and double, with row
// strides wider than the rows; the padding of dst is untouched.
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "core/transpose.hpp"

TEMPLATE_TEST_CASE("transpose equals the element-by-element transpose", "[core][transpose]", float, double) {
    using T = TestType;
    for (std::size_t n : {1, 3, 4, 7, 8, 9, 16, 17, 33})
        for (std::size_t k : {1, 2, 4, 5, 8, 12, 16, 19, 64}) {
            const std::size_t lds = k + 3, ldd = n + 5;
            std::vector<T> src(n * lds), dst(k * ldd, T(-1));
            for (std::size_t i = 0; i < src.size(); ++i) src[i] = T(i) * T(0.5) + T(1);
            favor::tiles::transpose(src.data(), n, k, lds, dst.data(), ldd);
            for (std::size_t c = 0; c < k; ++c)
                for (std::size_t j = 0; j < ldd; ++j) {
                    INFO("n " << n << " k " << k << " c " << c << " j " << j);
                    REQUIRE(dst[c * ldd + j] == (j < n ? src[j * lds + c] : T(-1)));
                }
        }
}
