// The registry of feature maps (favor/estimators/feature_registry.hpp): one line per map, its factory
// in its own file under lib/src/estimators/maps/. `favor list`, config validation and the contract tests
// (tests/estimators/test_feature_map_contract.cpp) walk it.
#include "favor/estimators/feature_registry.hpp"

#include "favor/core/names.hpp"

namespace favor {

// Each map's factory, defined in its own file under lib/src/estimators/maps/.
FeatureMapPtr make_trig(const FieldObject&, double epsilon);
FeatureMapPtr make_positive(const FieldObject&, double epsilon);
FeatureMapPtr make_hyperbolic(const FieldObject&, double epsilon);
FeatureMapPtr make_relu(const FieldObject&, double epsilon);
FeatureMapPtr make_oprf(const FieldObject&, double epsilon);
FeatureMapPtr make_elu(const FieldObject&, double epsilon);
FeatureMapPtr make_dpfp(const FieldObject&, double epsilon);
FeatureMapPtr make_nystrom(const FieldObject&, double epsilon);
FeatureMapPtr make_gerf(const FieldObject&, double epsilon);
FeatureMapPtr make_sderf(const FieldObject&, double epsilon);
FeatureMapPtr make_saderf(const FieldObject&, double epsilon);
FeatureMapPtr make_aderf(const FieldObject&, double epsilon);
FeatureMapPtr make_dark(const FieldObject&, double epsilon);
FeatureMapPtr make_taylor2(const FieldObject&, double epsilon);
FeatureMapPtr make_hedgehog(const FieldObject&, double epsilon);
FeatureMapPtr make_liger(const FieldObject&, double epsilon);
FeatureMapPtr make_softmax_dim(const FieldObject&, double epsilon);
FeatureMapPtr make_t2r(const FieldObject&, double epsilon);
FeatureMapPtr make_poisson(const FieldObject&, double epsilon);
FeatureMapPtr make_geometric(const FieldObject&, double epsilon);
FeatureMapPtr make_maclaurin(const FieldObject&, double epsilon);

const std::vector<FeatureMapEntry>& feature_map_registry() {
    static const std::vector<FeatureMapEntry> r = {
        {"trig", "exp(|x|^2/2)/sqrt(m) [sin Wx, cos Wx] (random Fourier features)", {"shift"}, make_trig},
        {"positive", "exp(-|x|^2/2)/sqrt(m) exp(Wx) (FAVOR+)", {"epsilon_after", "shift"}, make_positive},
        {"hyperbolic", "exp(-|x|^2/2)/sqrt(2m) [exp(Wx), exp(-Wx)]", {"epsilon_after", "shift"}, make_hyperbolic},
        {"relu", "relu(Wx)/sqrt(m) (generalized attention; not an estimator of SM)", {}, make_relu},
        {"oprf", "optimal positive features, FAVOR++ (\"A\": number < 1/8 or \"optimal\")", {"A", "epsilon_after", "shift"}, make_oprf},
        {"elu", "elu(x) + 1, F = d, no projection (linear transformer baseline; not an estimator of SM)", {}, make_elu},
        {"dpfp", "relu([x, -x]) * roll(..., s), s = 1..nu, F = 2 d nu, no projection (\"nu\", default 1; baseline)",
         {"nu"}, make_dpfp},
        {"nystrom", "Nystromformer: m segment-mean landmarks, no projection, pinv (\"pinv\": iterative|exact, \"iterations\"); "
                    "no row normalisation, not causal (baseline)",
         {"pinv", "iterations"}, make_nystrom},
        {"gerf", "generalized exponential features: oprf on (t x, y/t) (\"A\", \"t\": numbers or \"optimal\")", {"A", "t", "epsilon_after", "shift"}, make_gerf},
        {"sderf", "symmetric dense-exponential features, FAVOR# (matrix A fitted to the data)", {"epsilon_after", "shift"}, make_sderf},
        {"saderf", "simplified asymmetric dense-exponential features, FAVOR#: oprf on (Psi x, Psi^-1 y), fitted", {"epsilon_after", "shift"}, make_saderf},
        {"aderf", "asymmetric dense-exponential features, FAVOR#: oprf on (P x, P^-T y), P and A fitted in closed form", {"epsilon_after", "shift"}, make_aderf},
        {"dark", "DARK importance-weighted positive features, W Sigma^{1/2} with Sigma fitted to the queries' and keys' "
                 "moments (the same estimator as sderf, Sigma = I - 4A)", {"epsilon_after", "shift"}, make_dark},
        {"taylor2", "1 + x.y + (x.y)^2/2 exactly (Based's 2nd-order Taylor map), F = 1 + d + d(d+1)/2, no projection (biased)", {}, make_taylor2},
        {"hedgehog", "softmax([2x, -2x]), F = 2d, no projection (Hedgehog's map untrained; baseline); with \"weights\" "
                     "(scripts/fit_maps.py): the fitted [softmax(xA + b), softmax(-(xA + b))], F = 2w",
         {"weights"}, make_hedgehog},
        {"t2r", "relu(xA + b) fitted to a capture's heads (T2R; \"weights\" from scripts/fit_maps.py), F = w, no projection; "
                "without weights relu(x), F = d (untrained: A = I, b = 0)",
         {"weights"}, make_t2r},
        {"liger", "softmax(x) over the d entries, F = d, no projection (Liger's map; not an estimator of SM)", {}, make_liger},
        {"softmax_dim", "[softmax(x), softmax(-x)], each half over its d entries, F = 2d, no projection (LoLCATs' "
                        "SoftmaxDim untrained; not hedgehog's joint softmax; not an estimator of SM)",
         {}, make_softmax_dim},
        {"poisson", "discrete (Poisson) features of Chefs' Random Tables: prod_l (x_l/sqrt(lambda))^k_l, k_l ~ Poisson(lambda) "
                    "(\"lambda\": number or \"optimal\"); not positive", {"lambda"}, make_poisson},
        {"geometric", "discrete (geometric) features of Chefs' Random Tables: prod_l x_l^k_l / sqrt(k_l! p (1-p)^k_l), "
                      "k_l ~ Geom(p) (\"p\": number or \"optimal\"); not positive", {"p"}, make_geometric},
        {"maclaurin", "random Maclaurin features: sqrt(2^(N+1)/(N! m)) prod_{i<=N} w_i.x, P(N = n) = 2^-(n+1), w_i "
                      "Rademacher drawn from W's rows (iid projection only); unbiased, not positive", {}, make_maclaurin},
    };
    return r;
}

const std::vector<std::string>& feature_names() {
    static const std::vector<std::string> names = entry_names(feature_map_registry());
    return names;
}

const FeatureMapEntry* find_feature_map(const std::string& name) { return find_entry(feature_map_registry(), name); }

}  // namespace favor
