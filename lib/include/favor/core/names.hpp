#pragma once
// Name <-> enum tables for the user-facing choices (feature maps, projections, ...), with a
// "did you mean" in the error for an unknown name.
#include <string>
#include <utility>
#include <vector>

#include "favor/core/error.hpp"

namespace favor {

// "" if `text` is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF:
// what JSON holds), else where it is not: "byte 0xff at offset 3".
std::string utf8_problem(const std::string& text);

// "" if `text` has no NUL byte, else "holds a NUL character (\u0000) at offset N; ...": a NUL
// cuts a name or path where the OS reads it ("a\u0000b" would be the file "a"), so no config
// string or path flag may hold one (design.md section 5).
std::string nul_problem(const std::string& text);

// Levenshtein distance, for suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);

// The closest of `candidates` to `s` if it is close enough to be a likely typo, else "".
std::string closest_name(const std::string& s, const std::vector<std::string>& candidates);

// ", did you mean 'x'?" or "; expected one of a, b, c".
std::string suggestion(const std::string& s, const std::vector<std::string>& candidates);

template <class E>
std::vector<std::string> names_of(const std::vector<std::pair<E, std::string>>& table) {
    std::vector<std::string> out;
    for (const auto& [e, n] : table) out.push_back(n);
    return out;
}

template <class E>
E lookup_name(const std::vector<std::pair<E, std::string>>& table, const std::string& s,
              const char* what) {
    for (const auto& [e, n] : table)
        if (n == s) return e;
    throw Error(std::string("unknown ") + what + " '" + s + "'" + suggestion(s, names_of(table)));
}

template <class E>
std::string name_of(const std::vector<std::pair<E, std::string>>& table, E e) {
    for (const auto& [k, n] : table)
        if (k == e) return n;
    return "?";
}

// A registry (entries with a `name` member, e.g. feature maps, projections): its names in order,
// and the entry named `s` (nullptr when none is).
template <class Entry>
std::vector<std::string> entry_names(const std::vector<Entry>& registry) {
    std::vector<std::string> out;
    for (const Entry& e : registry) out.push_back(e.name);
    return out;
}
template <class Entry>
const Entry* find_entry(const std::vector<Entry>& registry, const std::string& s) {
    for (const Entry& e : registry)
        if (s == e.name) return &e;
    return nullptr;
}

}  // namespace favor
