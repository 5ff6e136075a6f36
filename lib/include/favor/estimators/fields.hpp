#pragma once
// Typed reads of JSON config fields. Every failure is one favor::Error line that names the
// file and the field path: "<file>: variants[1].A: must be < 1/8 (0.125), got 0.2".
// Used by the config parser and by each feature map for its own keys (feature_maps.hpp).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace favor {

// Where a value sits: the file and the dotted path inside it.
struct Field {
    Field(std::string file_, std::string path_ = "", std::string key_prefix_ = "")
        : file(std::move(file_)), path(std::move(path_)), key_prefix(std::move(key_prefix_)) {}
    std::string file;
    std::string path;
    std::string key_prefix;   // prepended to top-level keys ("--" for flags mapped to keys)
    Field at(const std::string& key) const;
    Field at(std::size_t index) const;
    [[noreturn]] void fail(const std::string& msg) const;
};

// "an integer", "a string", ... for messages.
std::string json_type_name(const nlohmann::json& v);

// Fails unless `obj` is an object whose keys are all in `allowed` (with a "did you mean").
void check_keys(const nlohmann::json& obj, const std::vector<std::string>& allowed, const Field& f);

std::uint64_t read_uint(const nlohmann::json& v, const Field& f, std::uint64_t lo, std::uint64_t hi);
double read_number(const nlohmann::json& v, const Field& f);   // finite
std::string read_string(const nlohmann::json& v, const Field& f);
bool read_bool(const nlohmann::json& v, const Field& f);

// A number or a non-empty list of numbers, returned sorted without repeats (grid order).
std::vector<std::size_t> read_uint_list(const nlohmann::json& v, const Field& f, std::size_t hi);
std::vector<double> read_positive_list(const nlohmann::json& v, const Field& f);
std::vector<double> read_number_list(const nlohmann::json& v, const Field& f);

// One object of the config (e.g. a variant) with typed reads of its keys.
struct FieldObject {
    const nlohmann::json& obj;
    Field where;
    bool has(const std::string& key) const { return obj.contains(key); }
    Field at(const std::string& key) const { return where.at(key); }
    double number(const std::string& key, double fallback) const;
    std::uint64_t uint(const std::string& key, std::uint64_t fallback, std::uint64_t lo, std::uint64_t hi) const;
    std::string string(const std::string& key, const std::string& fallback) const;
    const nlohmann::json& value(const std::string& key) const { return obj.at(key); }
};

}  // namespace favor
