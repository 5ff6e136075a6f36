// The projection registry and draw_projection (projections.hpp); the handle's out-of-line
// members (projection_handle.hpp).
#include "favor/estimators/projections.hpp"

#include <list>
#include <memory>
#include <mutex>
#include <tuple>

#include "favor/core/error.hpp"
#include "favor/core/names.hpp"
#include "favor/estimators/qmc.hpp"
#include "favor/estimators/structured.hpp"

namespace favor {

// Each projection's draw function, defined in its own file under lib/src/estimators/projections/.
Mat<double> draw_iid(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_orthogonal(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_orthogonal_fixed(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_orthogonal_nosignfix(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_simplex(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_hadamard(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_hadamard_fixed(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_givens(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_simplex_plus(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_qmc(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_fastfood(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_lattice(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);
Mat<double> draw_orthogonal_pnc(std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial);

namespace {
// ProjectionEntry::block_rows of the block shapes in use.
std::size_t no_blocks(std::size_t) { return 0; }
std::size_t square_blocks(std::size_t d) { return d; }
std::size_t pow2_blocks(std::size_t d) { return next_pow2(d); }

// The last draws, kept: W is a pure function of its arguments, so a caller asking again
// (favor.torch at every training step, apply at every head) gets a copy instead of a fresh
// draw (~0.8 ms for orthogonal m = 256, d = 64: the Gaussians and the QR). At most kEntries
// matrices and kBytes in all, none above kBytes / 8 (a run drawing thousands of small W keeps
// its last 64: the search stays short); the least recently used go first. Thread-safe.
class KeptDraws {
public:
    static constexpr std::size_t kBytes = std::size_t(16) << 20, kEntries = 64;
    using Key = std::tuple<const ProjectionEntry*, std::size_t, std::size_t, std::uint64_t, std::uint64_t>;
    std::shared_ptr<const Mat<double>> find(const Key& key) {
        const std::lock_guard<std::mutex> lock(mu_);
        for (auto it = kept_.begin(); it != kept_.end(); ++it)
            if (it->first == key) {
                kept_.splice(kept_.begin(), kept_, it);
                return it->second;
            }
        return nullptr;
    }
    void keep(const Key& key, const Mat<double>& W) {
        const std::size_t b = W.size() * sizeof(double);
        if (b > kBytes / 8) return;
        auto copy = std::make_shared<const Mat<double>>(W);
        const std::lock_guard<std::mutex> lock(mu_);
        kept_.emplace_front(key, std::move(copy));
        for (bytes_ += b; bytes_ > kBytes || kept_.size() > kEntries; kept_.pop_back())
            bytes_ -= kept_.back().second->size() * sizeof(double);
    }

private:
    std::mutex mu_;
    std::list<std::pair<Key, std::shared_ptr<const Mat<double>>>> kept_;
    std::size_t bytes_ = 0;
};
}  // namespace

const std::vector<ProjectionEntry>& projection_registry() {
    static const std::vector<ProjectionEntry> r = {
        {"iid", "entries N(0, 1)", 1, kAnyD, draw_iid, no_blocks, kGaussianRows | kIndependentRows},
        {"orthogonal", "ORF: Haar d x d blocks (QR sign-corrected by diag R), chi(d) row norms", 1, kAnyD,
         draw_orthogonal, square_blocks, kGaussianRows | kOrthogonalBlocks},
        {"orthogonal-fixed", "ORF's directions, every row norm sqrt(d) (the paper's SMREG; biased)", 1, kAnyD,
         draw_orthogonal_fixed, square_blocks, kOrthogonalBlocks | kFixedNorm},
        {"orthogonal-nosignfix", "ORF without the QR sign correction, as the public Performer code", 1, kAnyD,
         draw_orthogonal_nosignfix, square_blocks, kOrthogonalBlocks},
        {"simplex", "SimRF: Haar-rotated regular simplex d x d blocks, chi(d) row norms (d >= 2)", 2, kAnyD,
         draw_simplex, square_blocks, kGaussianRows},
        {"hadamard", "SORF: first d columns of H D1 H D2 H D3 blocks (p = next_pow2(d) rows), chi(p) norms", 1,
         kAnyD, draw_hadamard, pow2_blocks, kOrthogonalBlocks},
        {"hadamard-fixed", "SORF with Yu et al.'s fixed norm sqrt(p) (biased)", 1, kAnyD, draw_hadamard_fixed,
         pow2_blocks, kOrthogonalBlocks | kFixedNorm},
        {"givens", "d x d blocks of d ceil(log2 d) random Givens rotations, chi(d) row norms (d >= 2)", 2, kAnyD,
         draw_givens, square_blocks, kOrthogonalBlocks},
        {"simplex-plus", "SimRF+: simplex blocks with the directions fitted to the chi(d) norms (d >= 2)", 2, kAnyD,
         draw_simplex_plus, square_blocks, kGaussianRows},
        {"qmc", "Phi^-1 of Owen-scrambled Sobol points, row i = point i (d <= 1024)", 1, kSobolMaxDim, draw_qmc,
         no_blocks, kGaussianRows},
        {"fastfood", "FastFood: first d columns of S H G Pi H B blocks (p = next_pow2(d) rows), chi(p) norms", 1, kAnyD,
         draw_fastfood, pow2_blocks, 0},
        {"lattice", "Phi^-1 of a randomly shifted extensible rank-1 lattice (Korobov vector, d <= 256)", 1, kLatticeMaxD,
         draw_lattice, no_blocks, kGaussianRows},
        {"orthogonal-pnc", "ORF with pairwise antithetic chi(d) norms F^-1(u), F^-1(1-u) (Reid et al. 2024)", 1,
         kAnyD, draw_orthogonal_pnc, square_blocks, kGaussianRows | kOrthogonalBlocks},
    };
    return r;
}

const std::vector<std::string>& projection_names() {
    static const std::vector<std::string> names = entry_names(projection_registry());
    return names;
}

const ProjectionEntry* find_projection(const std::string& name) { return find_entry(projection_registry(), name); }

Projection::Projection() : entry_(&projection_registry().front()) {}

Projection::Projection(const std::string& name) : entry_(find_projection(name)) {
    if (!entry_) throw Error("unknown projection '" + name + "'" + suggestion(name, projection_names()));
}

std::string Projection::name() const { return entry_->name; }

Mat<double> draw_projection(Projection p, std::size_t m, std::size_t d, std::uint64_t seed, std::uint64_t trial) {
    const ProjectionEntry& e = p.entry();
    if (d < e.min_d)
        throw Error("projection '" + p.name() + "' needs d >= " + std::to_string(e.min_d) + ", got d = " + std::to_string(d));
    if (d > e.max_d)
        throw Error("projection '" + p.name() + "' needs d <= " + std::to_string(e.max_d) + ", got d = " + std::to_string(d));
    static KeptDraws kept;
    const KeptDraws::Key key{&e, m, d, seed, trial};
    if (const auto W = kept.find(key)) return *W;
    Mat<double> W = e.draw(m, d, seed, trial);
    kept.keep(key, W);
    return W;
}

}  // namespace favor
