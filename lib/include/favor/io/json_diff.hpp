#pragma once
// Where two JSON documents first differ, as one line for an error message: the resume check
// of a journal and `favor merge`'s config check name the field that differs.
#include <nlohmann/json.hpp>
#include <string>

namespace favor {

// "" if a == b, else e.g. "variants[1].epsilon: 1e-06 vs 0" or "causal: true vs false"
// (object keys in sorted order; a missing key shows as "(absent)").
std::string json_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path = "");

}  // namespace favor
