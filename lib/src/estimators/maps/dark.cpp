// dark: data-aligned positive random features with importance weights (DARKFormer, arXiv
// 2603.04127), in favor's form for SM(x, y) = exp(x.y) (docs/estimators.md, "dark"):
//   phi_r(x) = m^{-1/2} exp(w'_r.x - |x|^2/2 + (1/2) log rho_r),  w'_r = Sigma^{1/2} w_r,
//   rho_r = N(w'_r; 0, I)/N(w'_r; 0, Sigma),
//   (1/2) log rho_r = (1/4) log det Sigma - (1/4)|w'_r|^2 + (1/4)|w_r|^2,
// unbiased for any Sigma > 0 whenever each row w_r is N(0, I) (importance sampling of FAVOR+'s
// E_{w ~ N(0, I)}); finite variance needs every eigenvalue of Sigma > 1/2. Sigma is fitted per
// head: C = E[z z^T], z = x + y over all query/key pairs, C = U diag(c) U^T,
// Sigma = U diag(sigma) U^T, sigma_k = [(6 + 4c_k) + sqrt((6 + 4c_k)^2 - 32)] / 8.
// Since w'^T Sigma^{-1} w' = |w|^2, the exponent is w^T A w + w^T (I - 4A)^{1/2} x - |x|^2/2
// + (1/4) log det(I - 4A) with A = (I - Sigma)/4: sderf's features, and sigma_k = 1 - 4 A*(c_k)
// with sderf's M = C. So `dark` is sderf's map (sderf.cpp: fit, features, vjp, closed-form
// MSE) under DARK's parametrisation: it reports Sigma's and C's eigenvalues.
#include "sderf.hpp"

namespace favor {

FeatureMapPtr make_dark(const FieldObject& v, double epsilon) { return make_sderf_map(v, epsilon, SderfNames::dark); }

}  // namespace favor
