#pragma once
// A projection as the rest of the code passes it around: a handle to its entry in the
// projection registry. This header is small on purpose: variants, configs and experiments
// include it, while the registry entries and draw_projection sit in projections.hpp, which
// only the code that draws W or reads an entry's properties includes. Adding a projection
// changes neither header (docs/design.md section 2.2).
#include <string>

namespace favor {

struct ProjectionEntry;   // projections.hpp

class Projection {
public:
    // iid, the default of a variant.
    Projection();
    // The registry entry named `name`; throws Error "unknown projection 'x'" with a
    // suggestion if there is none.
    explicit Projection(const std::string& name);
    explicit Projection(const ProjectionEntry& entry) : entry_(&entry) {}

    // Its registry entry (the fields are in projections.hpp).
    const ProjectionEntry& entry() const { return *entry_; }
    // The config name ("orthogonal").
    std::string name() const;

    bool operator==(const Projection& o) const { return entry_ == o.entry_; }
    bool operator!=(const Projection& o) const { return entry_ != o.entry_; }

private:
    const ProjectionEntry* entry_;   // never null: an entry of projection_registry()
};

}  // namespace favor
