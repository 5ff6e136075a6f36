#include "favor/estimators/estimator.hpp"

#include <stdexcept>

#include "favor/estimators/projections.hpp"

namespace favor {

template <class T>
Estimator<T> Estimator<T>::for_inputs(MatView<T> Q, MatView<T> K, std::size_t head) const {
    Estimator<T> e = *this;
    e.map = map->for_head(head);
    if (map->data_dependent())
        e.map = e.map->fit(scale_rows(cast_mat<double>(Q)), scale_rows(cast_mat<double>(K)), W.shape(0));
    e.fitted = true;
    return e;
}

template <class T>
const FeatureMap& Estimator<T>::ready_map() const {
    if (map->data_dependent() && !fitted)
        throw std::logic_error("estimator '" + map->name() + "' used before for_inputs() fitted its parameters");
    return *map;
}

template <class T>
Estimator<T> make_estimator(const Variant& v, std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial,
                            Rounding rounding) {
    if (!v.map->uses_projection()) {
        Mat<T> zeros = Mat<T>::from_shape({m, d});
        zeros.fill(T(0));
        return {v.map, std::move(zeros), false, rounding, v.shift, v.hybrid};
    }
    Mat<T> W = cast_mat<T>(draw_projection(v.projection, m, d, seed, trial));
    round_to(rounding, W.data(), W.size());
    return {v.map, std::move(W), false, rounding, v.shift, v.hybrid};
}

template struct Estimator<float>;
template struct Estimator<double>;
template Estimator<float> make_estimator<float>(const Variant&, std::size_t, std::size_t, std::uint64_t, std::uint64_t,
                                                Rounding);
template Estimator<double> make_estimator<double>(const Variant&, std::size_t, std::size_t, std::uint64_t, std::uint64_t,
                                                  Rounding);

}  // namespace favor
