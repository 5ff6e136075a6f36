// The .npy header parser (npy_header.hpp): the fixed prefix and the header dict, read by a
// small Python-literal parser instead of xt::load_npy, which trusts the header: every length,
// count and offset is checked against the input before it is used.
#include "npy_header.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "favor/error.hpp"
#include "favor/npy.hpp"

namespace favor::npy {
namespace {

constexpr std::size_t kMaxHeaderLen = std::size_t(1) << 20;   // numpy writes ~128 bytes
constexpr std::size_t kMaxRank = 64;                          // numpy's own limit (NPY_MAXDIMS)
constexpr int kMaxDepth = 16;                                 // nesting of header literals
constexpr std::size_t kMaxItems = 256;                        // items of one header container

// Untrusted bytes quoted for a one-line message: printable ASCII kept, the rest as \xNN.
std::string quote(const std::string& s, std::size_t cap = 40) {
    std::string out = "'";
    for (std::size_t i = 0; i < s.size() && i < cap; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
            out += static_cast<char>(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        }
    }
    if (s.size() > cap) out += "...";
    return out + "'";
}

// --- the header: a Python dict literal ---------------------------------------------------

// One parsed literal. Only what a .npy header can hold; anything else is a syntax error.
struct Value {
    enum Kind { Str, Int, Float, Bool, None, Tuple, List, Dict } kind = None;
    std::string str;              // Str
    std::uint64_t mag = 0;        // Int: magnitude
    bool negative = false;        // Int: sign; Bool: unused
    bool overflow = false;        // Int: magnitude does not fit 64 bits
    bool flag = false;            // Bool
    std::vector<Value> items;     // Tuple / List; Dict: key, value, key, value, ...
};

const char* kind_name(Value::Kind k) {
    switch (k) {
        case Value::Str: return "a string";
        case Value::Int: return "an integer";
        case Value::Float: return "a float";
        case Value::Bool: return "a bool";
        case Value::None: return "None";
        case Value::Tuple: return "a tuple";
        case Value::List: return "a list";
        case Value::Dict: return "a dict";
    }
    return "?";
}

// Recursive-descent parser over [begin, end); nesting and container sizes are capped, so
// neither the stack nor the heap grows beyond a small multiple of the header length.
class LiteralParser {
public:
    LiteralParser(const std::string& name, const char* begin, std::size_t len)
        : name_(name), begin_(begin), p_(begin), end_(begin + len) {}

    Value parse_header_dict() {
        skip_space();
        Value v = parse_value(0);
        if (v.kind != Value::Dict) fail(name_, std::string("header is ") + kind_name(v.kind) + ", not a dict");
        skip_space();
        if (p_ != end_) syntax("unexpected text after the dict");
        return v;
    }

private:
    [[noreturn]] void syntax(const std::string& what) const {
        fail(name_, "header is not a valid Python dict literal (" + what + " at header byte " +
                        std::to_string(p_ - begin_) + ")");
    }
    void skip_space() {
        while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
    }
    static bool is_digit(char c) { return c >= '0' && c <= '9'; }
    static bool is_ident(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || is_digit(c);
    }

    Value parse_value(int depth) {
        if (depth > kMaxDepth) syntax("nesting too deep");
        if (p_ == end_) syntax("unexpected end");
        const char c = *p_;
        if (c == '\'' || c == '"') return parse_string();
        if (is_digit(c) || c == '-' || c == '+' || c == '.') return parse_number();
        if (c == '(') return parse_sequence(depth, ')', Value::Tuple);
        if (c == '[') return parse_sequence(depth, ']', Value::List);
        if (c == '{') return parse_dict(depth);
        if (is_ident(c)) return parse_name();
        syntax("unexpected character " + quote(std::string(1, c)));
    }

    Value parse_string() {
        const char q = *p_++;
        Value v;
        v.kind = Value::Str;
        while (true) {
            if (p_ == end_ || *p_ == '\n') syntax("unterminated string");
            char c = *p_++;
            if (c == q) break;
            if (c == '\\') {   // keep the escaped character itself; enough for dtype names
                if (p_ == end_) syntax("unterminated string");
                c = *p_++;
            }
            v.str += c;
        }
        return v;
    }

    Value parse_number() {
        const char* start = p_;
        Value v;
        v.kind = Value::Int;
        if (*p_ == '-' || *p_ == '+') {
            v.negative = *p_ == '-';
            ++p_;
        }
        bool digits = false;
        while (p_ != end_ && is_digit(*p_)) {
            const unsigned d = unsigned(*p_++ - '0');
            digits = true;
            if (v.mag > (std::numeric_limits<std::uint64_t>::max() - d) / 10) v.overflow = true;
            else v.mag = v.mag * 10 + d;
        }
        if (p_ != end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) {   // a float: skim it
            v.kind = Value::Float;
            while (p_ != end_ && (is_digit(*p_) || *p_ == '.' || *p_ == 'e' || *p_ == 'E' ||
                                  ((*p_ == '+' || *p_ == '-') && (p_[-1] == 'e' || p_[-1] == 'E')))) {
                digits |= is_digit(*p_);
                ++p_;
            }
        }
        if (!digits || (p_ != end_ && is_ident(*p_))) {
            p_ = start;
            syntax("malformed number");
        }
        return v;
    }

    Value parse_name() {
        const char* start = p_;
        while (p_ != end_ && is_ident(*p_)) ++p_;
        const std::string word(start, p_);
        Value v;
        if (word == "True" || word == "False") {
            v.kind = Value::Bool;
            v.flag = word == "True";
        } else if (word == "None") {
            v.kind = Value::None;
        } else {
            p_ = start;
            syntax("unexpected name " + quote(word));
        }
        return v;
    }

    // "(" or "[" already under p_. A parenthesised single value without a comma is that value.
    Value parse_sequence(int depth, char close, Value::Kind kind) {
        ++p_;
        Value v;
        v.kind = kind;
        bool comma = false;
        while (true) {
            skip_space();
            if (p_ == end_) syntax("unexpected end");
            if (*p_ == close) break;
            if (v.items.size() == kMaxItems) syntax("too many items");
            v.items.push_back(parse_value(depth + 1));
            skip_space();
            if (p_ != end_ && *p_ == ',') {
                ++p_;
                comma = true;
            } else if (p_ == end_ || *p_ != close) {
                syntax(std::string("expected ',' or '") + close + "'");
            }
        }
        ++p_;
        if (kind == Value::Tuple && v.items.size() == 1 && !comma) return std::move(v.items[0]);
        return v;
    }

    Value parse_dict(int depth) {
        ++p_;
        Value v;
        v.kind = Value::Dict;
        while (true) {
            skip_space();
            if (p_ == end_) syntax("unexpected end");
            if (*p_ == '}') break;
            if (v.items.size() == 2 * kMaxItems) syntax("too many items");
            v.items.push_back(parse_value(depth + 1));
            skip_space();
            if (p_ == end_ || *p_ != ':') syntax("expected ':'");
            ++p_;
            skip_space();
            v.items.push_back(parse_value(depth + 1));
            skip_space();
            if (p_ != end_ && *p_ == ',') ++p_;
            else if (p_ == end_ || *p_ != '}') syntax("expected ',' or '}'");
        }
        ++p_;
        return v;
    }

    const std::string& name_;
    const char* begin_;
    const char* p_;
    const char* end_;
};


// The three keys of a header dict, each given exactly once.
struct HeaderKeys {
    const Value* descr = nullptr;
    const Value* fortran = nullptr;
    const Value* shape = nullptr;
};

HeaderKeys header_keys(const std::string& name, const Value& dict) {
    HeaderKeys k;
    for (std::size_t i = 0; i < dict.items.size(); i += 2) {
        const Value& key = dict.items[i];
        if (key.kind != Value::Str) fail(name, std::string("header key is ") + kind_name(key.kind) + ", not a string");
        const Value** slot = key.str == "descr"           ? &k.descr
                             : key.str == "fortran_order" ? &k.fortran
                             : key.str == "shape"         ? &k.shape
                                                          : nullptr;
        if (!slot) fail(name, "unexpected key " + quote(key.str) + " in header");
        if (*slot) fail(name, "duplicate key " + quote(key.str) + " in header");
        *slot = &dict.items[i + 1];
    }
    if (!k.descr) fail(name, "header has no 'descr' key");
    if (!k.fortran) fail(name, "header has no 'fortran_order' key");
    if (!k.shape) fail(name, "header has no 'shape' key");
    return k;
}

// descr: one of the four float dtypes; sets dtype, byte order and item size.
void read_descr(const std::string& name, const Value& descr, Header& h) {
    if (descr.kind != Value::Str)
        fail(name, std::string("unsupported dtype (descr is ") + kind_name(descr.kind) +
                       "; supported: <f4, <f8, >f4, >f8)");
    h.dtype = descr.str;
    if (h.dtype != "<f4" && h.dtype != "<f8" && h.dtype != ">f4" && h.dtype != ">f8")
        fail(name, "unsupported dtype " + quote(h.dtype) + " (supported: <f4, <f8, >f4, >f8)");
    h.big_endian = h.dtype[0] == '>';
    h.itemsize = h.dtype[2] == '4' ? 4 : 8;
}

// shape: a tuple of at most kMaxRank non-negative integers, each within ptrdiff_t.
std::vector<std::size_t> read_shape(const std::string& name, const Value& shape) {
    if (shape.kind != Value::Tuple)
        fail(name, std::string("shape is ") + kind_name(shape.kind) + ", not a tuple of integers");
    if (shape.items.size() > kMaxRank)
        fail(name, "shape has " + std::to_string(shape.items.size()) + " dimensions (at most " +
                       std::to_string(kMaxRank) + ")");
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < shape.items.size(); ++i) {
        const Value& d = shape.items[i];
        const std::string which = "shape dimension " + std::to_string(i);
        if (d.kind != Value::Int) fail(name, which + " is " + kind_name(d.kind) + ", not an integer");
        if (d.negative && (d.mag != 0 || d.overflow)) fail(name, which + " is negative");
        // numpy's limit (npy_intp); it also keeps offsets representable as ptrdiff_t.
        if (d.overflow || d.mag > std::uint64_t(std::numeric_limits<std::ptrdiff_t>::max()))
            fail(name, which + " is too large");
        out.push_back(static_cast<std::size_t>(d.mag));
    }
    return out;
}

// The element count, checked step by step; zero anywhere makes the array empty.
std::size_t element_count(const std::string& name, const std::vector<std::size_t>& shape) {
    std::size_t count = 1;
    bool too_many = false;
    for (std::size_t d : shape) {
        if (d == 0) return 0;
        if (too_many || count > kNpyMaxElements / d) too_many = true;
        else count *= d;
    }
    if (too_many)
        fail(name, "shape " + shape_str(shape) + " has more than " + std::to_string(kNpyMaxElements) + " elements");
    return count;
}

}  // namespace

[[noreturn]] void fail(const std::string& name, const std::string& what) { throw Error(name + ": " + what); }

// The fixed prefix: magic, version, header length. `head` holds the first min(size, 12) bytes
// of a file of `size` bytes. Returns the offset of the header text and sets its length.
std::size_t parse_prefix(const std::string& name, const char* head, std::size_t size,
                         std::size_t& header_len) {
    if (size == 0) fail(name, "empty file (not a .npy file)");
    if (std::memcmp(head, kMagic, std::min(size, kMagicLen)) != 0)
        fail(name, "not a .npy file (bad magic " + quote(std::string(head, std::min(size, kMagicLen))) + ")");
    if (size < kMagicLen + 2) fail(name, "truncated header (file is " + std::to_string(size) + " bytes)");
    const auto major = static_cast<unsigned char>(head[6]);
    const auto minor = static_cast<unsigned char>(head[7]);
    if (major < 1 || major > 3 || minor != 0)
        fail(name, "unsupported .npy format version " + std::to_string(major) + "." +
                       std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
    const std::size_t len_bytes = major == 1 ? 2 : 4;
    const std::size_t start = kMagicLen + 2 + len_bytes;
    if (size < start) fail(name, "truncated header (file is " + std::to_string(size) + " bytes)");
    const auto* u = reinterpret_cast<const unsigned char*>(head + kMagicLen + 2);
    std::uint64_t len = 0;
    for (std::size_t i = len_bytes; i-- > 0;) len = (len << 8) | u[i];   // little-endian
    if (len > kMaxHeaderLen)
        fail(name, "header length " + std::to_string(len) + " exceeds the limit of " +
                       std::to_string(kMaxHeaderLen) + " bytes");
    if (len > size - start)
        fail(name, "header length " + std::to_string(len) + " goes beyond the end of the file (" +
                       std::to_string(size) + " bytes)");
    header_len = static_cast<std::size_t>(len);
    return start;
}

Header parse_header(const std::string& name, const char* text, std::size_t len) {
    const Value dict = LiteralParser(name, text, len).parse_header_dict();
    const HeaderKeys keys = header_keys(name, dict);
    Header h;
    read_descr(name, *keys.descr, h);
    if (keys.fortran->kind != Value::Bool)
        fail(name, std::string("fortran_order is ") + kind_name(keys.fortran->kind) + ", not True or False");
    h.fortran = keys.fortran->flag;
    h.shape = read_shape(name, *keys.shape);
    h.count = element_count(name, h.shape);
    h.data_bytes = h.count * h.itemsize;
    return h;
}

void check_data_size(const std::string& name, const Header& h, std::size_t found) {
    if (found == h.data_bytes) return;
    fail(name, std::string(found < h.data_bytes ? "truncated data" : "trailing data after the array") +
                   " (expected " + std::to_string(h.data_bytes) + " bytes, found " +
                   std::to_string(found) + ")");
}


}  // namespace favor::npy

namespace favor {

std::string shape_str(const std::vector<std::size_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace favor
