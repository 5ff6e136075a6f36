#pragma once
// JSON text as favor reads it: every JSON favor reads (configs, --set values, journals, run.json
// in merge, apply's flag values) goes through parse_json_text, which refuses what JSON parsers
// accept silently (a NUL byte, a repeated key) or cannot survive (deep nesting). And the
// `--set PATH=VALUE` assignments applied to a JSON document before the config schema reads it.
// Every failure is a favor::Error with one line naming the text and the place.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "favor/core/error.hpp"

namespace favor {

// Syntax errors of parse_json_text (an Error: exit 2).
class JsonSyntaxError : public Error {
public:
    using Error::Error;
};
// JSON text (comments allowed) as a config is read: a NUL byte, a repeated key in an object
// (JSON parsers keep one silently), nesting deeper than kMaxJsonDepth and syntax errors are
// errors naming `name` and the place. `comments` false: strict JSON (a .safetensors header).
nlohmann::json parse_json_text(const std::string& text, const std::string& name, bool comments = true);
// Deepest nesting of arrays and objects favor reads: real configs, run.json and journal
// headers nest 5 levels; nlohmann's dump and comparison recurse once per level, so a 100 KB
// text of '[' would overflow the stack. Checked by a scan without recursion first.
inline constexpr std::size_t kMaxJsonDepth = 64;

// `--set`: a dotted path (`inputs.scale`, `variants.0.A`) and a JSON value (a bare word that
// is not JSON is taken as a string). Throws Error naming the path. A null value removes the
// key (its default applies).
void apply_set(nlohmann::json& j, const std::string& assignment);
void set_path(nlohmann::json& j, const std::string& path, const nlohmann::json& value);

}  // namespace favor
