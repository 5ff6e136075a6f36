#pragma once
// Feature maps, for includers that use several parts: the FeatureMap interface
// (feature_map.hpp), the registry of maps (feature_registry.hpp) and the whole-matrix feature
// functions (features.hpp). Each has its own header below.
#include "favor/estimators/feature_map.hpp"
#include "favor/estimators/feature_registry.hpp"
#include "favor/estimators/features.hpp"
