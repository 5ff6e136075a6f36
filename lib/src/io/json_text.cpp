// JSON text as favor reads it (json_text.hpp): NUL bytes, repeated keys and nesting beyond
// kMaxJsonDepth refused with a message naming the place; and the `--set PATH=VALUE` parser.
#include "favor/io/json_text.hpp"

#include <utility>
#include <vector>
#include <stdexcept>

#include "favor/core/names.hpp"

namespace favor {

using nlohmann::json;

namespace {
// Removes the key at the end of `parts` (a path set_path has just walked) from its object.
void erase_path(json& j, const std::vector<std::string>& parts) {
    json* cur = &j;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i)
        cur = cur->is_array() ? &(*cur)[std::stoul(parts[i])] : &(*cur)[parts[i]];
    if (cur->is_object()) cur->erase(parts.back());
}
}  // namespace

void set_path(json& j, const std::string& path, const json& value) {
    if (path.empty()) throw Error("--set: empty path");
    json* cur = &j;
    // Split on '.', keeping empty components ("m.", ".m", "a..b") so they are refused.
    std::vector<std::string> parts(1);
    for (const char c : path) {
        if (c == '.') parts.emplace_back();
        else parts.back() += c;
    }
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const std::string& p = parts[i];
        if (p.empty()) throw Error("--set " + path + ": empty path component (PATH is keys and list indices joined by '.')");
        const bool last = i + 1 == parts.size();
        if (cur->is_array()) {
            std::size_t idx = 0;
            try {
                std::size_t used = 0;
                if (p.find_first_not_of("0123456789") != std::string::npos) throw std::invalid_argument(p);
                idx = std::stoul(p, &used);
                if (used != p.size()) throw std::invalid_argument(p);
            } catch (const std::exception&) {
                throw Error("--set " + path + ": '" + p + "' is not a list index");
            }
            if (idx >= cur->size())
                throw Error("--set " + path + ": index " + p + " is past the end of a list of " + std::to_string(cur->size()));
            cur = &(*cur)[idx];
        } else {
            if (cur->is_null()) *cur = json::object();
            if (!cur->is_object()) throw Error("--set " + path + ": '" + p + "' is inside a value that is not an object");
            cur = &(*cur)[p];
        }
        if (last) *cur = value;
    }
    // null removes an object's key (its default applies): --m sets num_features=null.
    if (value.is_null()) erase_path(j, parts);
}

void apply_set(json& j, const std::string& assignment) {
    const auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0)
        throw Error("--set " + assignment + ": expected PATH=VALUE (e.g. inputs.scale=0.5)");
    // A bare word becomes a JSON string: it must be UTF-8, or run.json could not be written.
    if (const std::string bad = utf8_problem(assignment); !bad.empty())
        throw Error("--set " + assignment + ": not valid UTF-8 (" + bad + ")");
    const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
    if (text.empty()) throw Error("--set " + path + ": empty value (give a JSON value, e.g. " + path + "=1)");
    json value;
    try {
        value = parse_json_text(text, "--set " + path);
    } catch (const JsonSyntaxError&) {
        value = text;   // a bare word: a string
    }
    set_path(j, path, value);
}

namespace {
// parse_json_text's SAX handler: builds the document as nlohmann's own DOM parser does, and
// refuses a repeated key (one map lookup per key). nlohmann's callback parser, which this
// replaces, scans the whole parent container at the end of every object (to drop a
// discarded value), so N objects in one object or list took O(N^2): 69 s for a
// .safetensors header of 40k tensors.
class CheckedDom {
public:
    explicit CheckedDom(const std::string& name) : name_(name) {}
    json result;

    bool null() { return put(nullptr); }
    bool boolean(bool v) { return put(v); }
    bool number_integer(json::number_integer_t v) { return put(v); }
    bool number_unsigned(json::number_unsigned_t v) { return put(v); }
    bool number_float(json::number_float_t v, const std::string&) { return put(v); }
    bool string(std::string& v) { return put(std::move(v)); }
    bool binary(json::binary_t& v) { return put(std::move(v)); }
    bool start_object(std::size_t) { return open(json::object()); }
    bool start_array(std::size_t) { return open(json::array()); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool key(std::string& k) {
        auto& obj = stack_.back().value->get_ref<json::object_t&>();
        const auto [it, fresh] = obj.emplace(std::move(k), nullptr);
        if (!fresh)
            throw Error(name_ + ": " + path(it->first) + ": duplicate key (JSON would keep only the last value; remove one)");
        stack_.back().key = &it->first;
        slot_ = &it->second;
        return true;
    }
    template <class Exception>
    bool parse_error(std::size_t, const std::string&, const Exception& e) {
        throw e;
    }

private:
    struct Frame {
        json* value;
        const std::string* key = nullptr;   // an object's current key
    };
    const std::string& name_;
    std::vector<Frame> stack_;
    json* slot_ = nullptr;   // where an object's next value goes (after its key)

    json* place() {
        if (stack_.empty()) return &result;
        json& c = *stack_.back().value;
        return c.is_array() ? &c.emplace_back() : slot_;
    }
    template <class V>
    bool put(V&& v) {
        *place() = json(std::forward<V>(v));
        return true;
    }
    bool open(json empty) {
        json* v = place();
        *v = std::move(empty);
        stack_.push_back({v});
        return true;
    }
    bool close() {
        stack_.pop_back();
        return true;
    }
    // "variants[1].A": the containers above the key, then the key.
    std::string path(const std::string& last) const {
        std::string p;
        for (std::size_t k = 0; k + 1 < stack_.size(); ++k)
            p += stack_[k].value->is_array() ? "[" + std::to_string(stack_[k].value->size() - 1) + "]"
                                             : (p.empty() ? "" : ".") + *stack_[k].key;
        return p + (p.empty() ? "" : ".") + last;
    }
};
}  // namespace

namespace {
// Error if arrays and objects in `text` nest deeper than kMaxJsonDepth; one pass, no recursion
// (brackets in strings and comments do not count; a syntax error is left to the parser).
void check_json_depth(const std::string& text, const std::string& name) {
    std::size_t depth = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '"') {   // skip the string, escapes included
            for (++i; i < text.size() && text[i] != '"'; ++i) i += text[i] == '\\';
        } else if (c == '/' && i + 1 < text.size() && (text[i + 1] == '/' || text[i + 1] == '*')) {
            const std::size_t end = text.find(text[i + 1] == '/' ? "\n" : "*/", i + 2);
            i = end == std::string::npos ? text.size() : end;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth)
                throw Error(name + ": nested deeper than " + std::to_string(kMaxJsonDepth) +
                            " levels at byte " + std::to_string(i) + " (favor's limit; no config or result nests so deep)");
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
}
}  // namespace

json parse_json_text(const std::string& text, const std::string& name, bool comments) {
    // A NUL ends the text for the JSON parser, which would silently ignore the rest.
    if (const auto nul = text.find('\0'); nul != std::string::npos)
        throw Error(name + ": byte " + std::to_string(nul) + " is NUL (expected JSON text)");
    check_json_depth(text, name);
    CheckedDom dom(name);
    try {
        json::sax_parse(text, &dom, json::input_format_t::json, /*strict=*/true, /*ignore_comments=*/comments);
        return std::move(dom.result);
    } catch (const json::parse_error& e) {
        throw JsonSyntaxError(name + ": invalid JSON: " + e.what());
    } catch (const json::exception& e) {   // numbers beyond double range
        throw Error(name + ": invalid JSON: " + e.what());
    }
}

}  // namespace favor
