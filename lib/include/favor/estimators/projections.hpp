#pragma once
// Random projections W (m x d, rows w_i), shared by queries and keys (docs/design.md section 2.2;
// docs/estimators.md section 2 has each one's construction, source and bias).
//
// One draw function per projection, each in lib/src/estimators/projections/<family>.cpp (variants that
// share one construction, as orthogonal / orthogonal-fixed / orthogonal-nosignfix, share a
// file), listed by one line in the registry (lib/src/estimators/projections.cpp). The rest of the code
// holds a projection as a Projection handle (projection_handle.hpp); include this header only
// to draw W or to read an entry's limits and properties.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "favor/core/tensor.hpp"
#include "favor/estimators/projection_handle.hpp"

namespace favor {

// Property flags of a registry entry (ProjectionEntry::flags): what other code relies on and
// what tests/estimators/test_projection_contract.cpp checks for every entry that claims them.
enum ProjectionFlag : unsigned {
    // Every row is marginally N(0, I_d) (so E[w w^T] = I_d): the exp-family and trig
    // estimators of SM are unbiased, whatever the coupling between rows (Choromanski et al.
    // 2021, Lemma 1 needs only the marginal).
    kGaussianRows = 1u << 0,
    // The rows are moreover independent: the iid closed-form MSEs (Lemma 2; theory.hpp) hold.
    kIndependentRows = 1u << 1,
    // The rows of a block are orthogonal whenever the block is square (block_rows(d) == d;
    // hadamard's p x p blocks, p = next_pow2(d), lose it when truncated to d < p columns).
    kOrthogonalBlocks = 1u << 2,
    // Every row has norm sqrt(block_rows(d)) before truncation to d columns, so sqrt(d)
    // whenever the block is square.
    kFixedNorm = 1u << 3,
};

// d of any size (ProjectionEntry::max_d).
constexpr std::size_t kAnyD = std::numeric_limits<std::size_t>::max();

struct ProjectionEntry {
    const char* name;
    const char* summary;          // one line for `favor list`
    std::size_t min_d, max_d;     // the dimensions it is defined for (draw_projection checks)
    // W (m, d) for (seed, trial), d within the limits: a pure function of its arguments whose
    // first m rows do not depend on m (contract at draw_projection).
    Mat<double> (*draw)(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
    // Rows per block of W in dimension d, 0 where rows are not drawn in blocks (iid, qmc).
    std::size_t (*block_rows)(std::size_t d);
    unsigned flags;               // ProjectionFlag bits
    bool has(ProjectionFlag f) const { return (flags & f) != 0; }
};

const std::vector<ProjectionEntry>& projection_registry();
const std::vector<std::string>& projection_names();
// The entry named `name`, or nullptr.
const ProjectionEntry* find_projection(const std::string& name);

// W for (seed, projection, m, d, trial): a pure function of those values (docs/design.md s. 7).
// Rows are nested in m: the first m rows of W(m') for m' > m are W(m). Returns (m, d).
// Blocks have block_rows(d) rows; block b and row norms come from streams keyed by
// (seed, projection tag, d, trial[, b]); the last block is truncated (a simplex-plus block
// still uses all d of its norms). qmc has no blocks: row i is point i.
// Throws Error naming the projection if d is outside [min_d, max_d]. The last draws are kept
// (the last 64, up to 16 MB): asking again costs a copy.
Mat<double> draw_projection(Projection p, std::size_t m, std::size_t d, std::uint64_t seed,
                            std::uint64_t trial);

}  // namespace favor
