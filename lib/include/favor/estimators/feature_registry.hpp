#pragma once
// The registry of feature maps: one entry per map (name, summary, config keys, factory), listed
// in lib/src/estimators/feature_maps.cpp; `favor list`, the config validation and the contract tests
// walk it.
#include <string>
#include <vector>

#include "favor/estimators/feature_map.hpp"
#include "favor/estimators/fields.hpp"

namespace favor {

struct FeatureMapEntry {
    const char* name;
    const char* summary;                // one line for `favor list`
    std::vector<std::string> keys;      // its own config keys, besides features, projection,
                                        // name and epsilon
    FeatureMapPtr (*make)(const FieldObject& variant, double epsilon);
};
const std::vector<FeatureMapEntry>& feature_map_registry();
const std::vector<std::string>& feature_names();
// The entry named `name`, or nullptr.
const FeatureMapEntry* find_feature_map(const std::string& name);
// "none", the map without features: a hybrid's missing remainder (docs/design.md section 2.8;
// lib/src/estimators/maps/none.cpp). Not in the registry.
FeatureMapPtr make_none_map();

}  // namespace favor
