// The .npy header parser (npy_header.hpp): the fixed prefix and the header dict, read by a
// small Python-literal parser instead of xt::load_npy, which trusts the header: every length,
// count and offset is checked against the input before it is used.
#include "io/npy_header.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>

#include "favor/core/error.hpp"
#include "favor/io/npy.hpp"

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

// descr: a float dtype of 2, 4 or 8 bytes in either byte order, or bfloat16, little-endian: a
// 2-byte void ('<V2', '|V2': how numpy.save writes ml_dtypes' bfloat16, ml_dtypes issue 41) or
// 'bfloat16' (the header that workaround writes); sets dtype, element type, byte order.
void read_descr(const std::string& name, const Value& descr, Header& h) {
    const char* supported = "supported: <f2, <f4, <f8, >f2, >f4, >f8, and bfloat16, <V2 or |V2 read as bfloat16";
    if (descr.kind != Value::Str)
        fail(name, std::string("unsupported dtype (descr is ") + kind_name(descr.kind) + "; " + supported + ")");
    h.dtype = descr.str;
    const std::string& t = h.dtype;
    const bool order = t.size() == 3 && (t[0] == '<' || t[0] == '>');
    if (order && t[1] == 'f' && (t[2] == '2' || t[2] == '4' || t[2] == '8')) {
        h.elem = t[2] == '2' ? Elem::f16 : t[2] == '4' ? Elem::f32 : Elem::f64;
        h.big_endian = t[0] == '>';
    } else if (t == "<V2" || t == "|V2" || t == "bfloat16") {
        h.elem = Elem::bf16;
    } else {
        fail(name, "unsupported dtype " + quote(t) + " (" + supported + ")");
    }
    h.itemsize = elem_size(h.elem);
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

std::string held_names(const std::vector<std::string>& names) {
    constexpr std::size_t shown = 20;
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > shown) out += ", ... (" + std::to_string(names.size()) + " in all)";
    return names.empty() ? "nothing" : out;
}

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

double load_elem(const Header& h, const char* p) {
    const bool swap = h.big_endian == host_little_endian();
    if (h.elem == Elem::f64) {
        std::uint64_t u;
        std::memcpy(&u, p, 8);
        if (swap) u = bswap(u);
        double f;
        std::memcpy(&f, &u, 8);
        return f;
    }
    if (h.elem == Elem::f32) {
        std::uint32_t u;
        std::memcpy(&u, p, 4);
        if (swap) u = bswap(u);
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    const auto b0 = static_cast<unsigned char>(p[0]), b1 = static_cast<unsigned char>(p[1]);
    const std::uint32_t u = swap ? (std::uint32_t(b0) << 8) | b1 : (std::uint32_t(b1) << 8) | b0;
    if (h.elem == Elem::bf16) {   // the top 16 bits of a float32
        const std::uint32_t w = u << 16;
        float f;
        std::memcpy(&f, &w, 4);
        return f;
    }
    // IEEE binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits.
    const std::uint32_t e = (u >> 10) & 0x1f, m = u & 0x3ff;
    const double mag = e == 0    ? std::ldexp(double(m), -24)
                       : e == 31 ? (m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity())
                                 : std::ldexp(double(m | 0x400), int(e) - 25);
    return (u & 0x8000) ? -mag : mag;
}

Decoder::Decoder(const Header& h, double* out)
    : h_(h), out_(out), transpose_(h.fortran && h.shape.size() > 1), index_(h.shape.size(), 0),
      stride_(h.shape.size(), 1) {
    for (std::size_t k = h.shape.size(); k-- > 1;) stride_[k - 1] = stride_[k] * h.shape[k];
}

void Decoder::feed(const char* bytes, std::size_t n) {
    assert(n % h_.itemsize == 0);
    for (std::size_t i = 0; i < n; i += h_.itemsize) {
        out_[pos_] = load_elem(h_, bytes + i);
        advance();
    }
}

// Next destination: sequential in C order; in Fortran order the first index runs fastest.
void Decoder::advance() {
    if (!transpose_) {
        ++pos_;
        return;
    }
    for (std::size_t k = 0; k < index_.size(); ++k) {
        pos_ += stride_[k];
        if (++index_[k] < h_.shape[k]) return;
        pos_ -= stride_[k] * h_.shape[k];
        index_[k] = 0;
    }
}

NpyArray read_npy_stream(const std::string& name, std::size_t size, const ReadExact& read, bool header_only) {
    // The prefix: magic and version (8 bytes), then the 2- or 4-byte header length.
    char head[12] = {};
    std::size_t got = std::min<std::size_t>(size, 8);
    read(head, got);
    if (got == 8) {
        const std::size_t len_bytes = static_cast<unsigned char>(head[6]) == 1 ? 2 : 4;
        const std::size_t more = std::min(size - 8, len_bytes);
        read(head + 8, more);
        got += more;
    }
    std::size_t header_len = 0;
    const std::size_t start = parse_prefix(name, head, size, header_len);   // start == got here
    std::string text(header_len, '\0');
    read(&text[0], header_len);
    const Header h = parse_header(name, text.data(), text.size());
    check_data_size(name, h, size - start - header_len);
    NpyArray a;
    a.shape = h.shape;
    a.dtype = h.dtype;
    if (header_only) return a;
    a.data.resize(h.count);
    Decoder dec(h, a.data.data());
    std::vector<char> chunk(std::min<std::size_t>(h.data_bytes, std::size_t(1) << 20));
    for (std::size_t left = h.data_bytes; left > 0;) {
        const std::size_t n = std::min(left, chunk.size());   // a multiple of the item size
        read(chunk.data(), n);
        dec.feed(chunk.data(), n);
        left -= n;
    }
    return a;
}


}  // namespace favor::npy

namespace favor {

std::string shape_str(const std::vector<std::size_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace favor
