#pragma once
// Input families calibrated to real attention heads (issue 22 part 3; docs/design.md
// sections 5 and 7, docs/input_families.md): knobs that real heads show and isotropic
// Gaussian inputs lack, applied to the isotropic draws of inputs.hpp row by row, each knob's
// randomness from its own stream (seed, "inputs-<knob>", d). Every knob acts on row i alone
// (RoPE through i as the position), so the inputs stay nested in L and a pure function of
// (seed, L, d, d_v, scale, family); scale stays a plain factor. With no knob set the inputs
// are exactly random_inputs' isotropic ones.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "favor/core/tensor.hpp"
#include "favor/estimators/fields.hpp"

namespace favor {

// The knobs, as keys of a random `inputs` object (defaults: isotropic, no knob).
struct InputFamily {
    // Anisotropic covariance: eigenvalues lambda_i ∝ (i + 1)^-decay (mean 1, so the mean
    // squared entry stays scale^2) along the rows of a Haar basis. Real heads: a few
    // directions carry most of the variance (low effective rank of Q and K).
    double decay_q = 0, decay_k = 0;
    bool shared_basis = true;           // K's eigenvectors are Q's (real heads share directions)
    // A mean offset added to every row: offset * scale * u (keys: times key_scale too), u a
    // random unit direction
    // (the shared key bias behind attention sinks, Xiao et al. 2023).
    double offset_q = 0, offset_k = 0;
    std::optional<double> offset_cos;   // cosine of the two directions (default: independent)
    // Heavy-tailed key norms: the centred part of key row i (before the offset) times
    // exp(sigma g_i - sigma^2), g_i ~ N(0, 1), a log-normal factor with E f^2 = 1, so the
    // covariance stays (a few keys of large norm, as in trained heads).
    double key_norm_sigma = 0;
    double key_scale = 1;               // keys (offset included) times this (real heads: |k| != |q|)
    // Rotary positions (RoPE, Su et al. 2021): pairs (2p, 2p+1) of row i rotated by angle
    // i * rope_base^(-2p/d), applied last (after projection, as the models do). Needs even d.
    std::optional<double> rope_base;
    // Clustered keys: key row i = sqrt(1 - s^2) mu_c(i) + s z_i before the anisotropy, n
    // centers mu_c ~ N(0, I), s = cluster_spread in [0, 1] (1: no clusters).
    std::size_t key_clusters = 0;
    double cluster_spread = 1;

    bool any() const;                   // some knob differs from the isotropic default
    nlohmann::json resolved() const;    // the keys that are set (empty object: none)
};

// The family keys of an `inputs` object (config.cpp's allowed keys).
const std::vector<std::string>& family_keys();

// Reads the family keys present in `inputs` (a random inputs object); errors name the key.
InputFamily parse_family(const nlohmann::json& inputs, const Field& where);

// Fails (naming the key at `where`) unless the family can be drawn in dimension d: RoPE needs
// an even d, offset_cos d >= 2.
void check_family_dimension(const InputFamily& f, std::size_t d, const Field& where);

// `favor gen --family KEY=VALUE` (repeatable): VALUE read as JSON (else a string), checked as
// the config key; errors "gen: --family KEY: ...".
InputFamily parse_family_flags(const std::vector<std::string>& assignments);

// Rows [first, first + rows) of an (L, d) matrix, stored at `data` (row-major, d apart).
struct RowBlock {
    double* data = nullptr;
    std::size_t rows = 0, d = 0, first = 0;
    double* row(std::size_t i) const { return data + i * d; }
};

// The family with its own draws for one seed (bases, offset directions) made once, applied
// to any block of rows: every step is row by row (row i's draws are indexed by i), so a
// block gets the bits those rows get when the whole matrix is transformed at once.
class FamilyTransform {
public:
    FamilyTransform(const InputFamily& f, std::uint64_t seed, std::size_t d);
    // In place, at scale 1: q's and k's rows of one block (the same rows of both).
    void apply(const RowBlock& q, const RowBlock& k) const;

private:
    InputFamily f_;
    std::uint64_t seed_;
    Mat<double> bq_, bk_;                        // the anisotropy's bases
    std::vector<double> root_q_, root_k_;        // and sqrt of its spectra
    std::vector<double> uq_, uk_;                // the offsets' directions
};

// Applies the family to isotropic draws at scale 1, in place: q (L, d), k (Lk, d).
void apply_family(const InputFamily& f, std::uint64_t seed, Mat<double>& q, Mat<double>& k);

// RoPE: row i's coordinate pairs (2p, 2p+1) rotated by i * base^(-2p/d); x (L, d), d even.
void apply_rope(Mat<double>& x, double base);

}  // namespace favor
