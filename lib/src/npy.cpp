// NPY reader and writer. The reader parses the header itself (a small Python-literal parser)
// instead of using xt::load_npy, which trusts the header: every length, count and offset is
// checked against the input before it is used, and no buffer is sized before the data size
// has been matched against the file size.
#include "favor/npy.hpp"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include <sys/stat.h>
#include <unistd.h>

#include "favor/error.hpp"
#include "favor/files.hpp"

namespace favor {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr std::size_t kMaxHeaderLen = std::size_t(1) << 20;   // numpy writes ~128 bytes
constexpr std::size_t kMaxRank = 64;                          // numpy's own limit (NPY_MAXDIMS)
constexpr int kMaxDepth = 16;                                 // nesting of header literals
constexpr std::size_t kMaxItems = 256;                        // items of one header container

[[noreturn]] void fail(const std::string& name, const std::string& what) {
    throw Error(name + ": " + what);
}

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

bool host_little_endian() {
    const std::uint16_t one = 1;
    unsigned char first;
    std::memcpy(&first, &one, 1);
    return first == 1;
}

std::uint32_t bswap(std::uint32_t x) {
    return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}
std::uint64_t bswap(std::uint64_t x) {
    return (std::uint64_t(bswap(std::uint32_t(x))) << 32) | bswap(std::uint32_t(x >> 32));
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

// --- validated layout ---------------------------------------------------------------------

struct Header {
    std::string dtype;
    bool fortran = false;
    bool big_endian = false;
    std::size_t itemsize = 0;
    std::vector<std::size_t> shape;
    std::size_t count = 1;        // prod(shape)
    std::size_t data_bytes = 0;   // count * itemsize
};

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
    const Value* descr = nullptr;
    const Value* fortran = nullptr;
    const Value* shape = nullptr;
    for (std::size_t i = 0; i < dict.items.size(); i += 2) {
        const Value& key = dict.items[i];
        if (key.kind != Value::Str) fail(name, std::string("header key is ") + kind_name(key.kind) + ", not a string");
        const Value** slot = key.str == "descr"           ? &descr
                             : key.str == "fortran_order" ? &fortran
                             : key.str == "shape"         ? &shape
                                                          : nullptr;
        if (!slot) fail(name, "unexpected key " + quote(key.str) + " in header");
        if (*slot) fail(name, "duplicate key " + quote(key.str) + " in header");
        *slot = &dict.items[i + 1];
    }
    if (!descr) fail(name, "header has no 'descr' key");
    if (!fortran) fail(name, "header has no 'fortran_order' key");
    if (!shape) fail(name, "header has no 'shape' key");

    Header h;
    if (descr->kind != Value::Str)
        fail(name, std::string("unsupported dtype (descr is ") + kind_name(descr->kind) +
                       "; supported: <f4, <f8, >f4, >f8)");
    h.dtype = descr->str;
    if (h.dtype != "<f4" && h.dtype != "<f8" && h.dtype != ">f4" && h.dtype != ">f8")
        fail(name, "unsupported dtype " + quote(h.dtype) + " (supported: <f4, <f8, >f4, >f8)");
    h.big_endian = h.dtype[0] == '>';
    h.itemsize = h.dtype[2] == '4' ? 4 : 8;

    if (fortran->kind != Value::Bool)
        fail(name, std::string("fortran_order is ") + kind_name(fortran->kind) + ", not True or False");
    h.fortran = fortran->flag;

    if (shape->kind != Value::Tuple)
        fail(name, std::string("shape is ") + kind_name(shape->kind) + ", not a tuple of integers");
    if (shape->items.size() > kMaxRank)
        fail(name, "shape has " + std::to_string(shape->items.size()) + " dimensions (at most " +
                       std::to_string(kMaxRank) + ")");
    for (std::size_t i = 0; i < shape->items.size(); ++i) {
        const Value& d = shape->items[i];
        const std::string which = "shape dimension " + std::to_string(i);
        if (d.kind != Value::Int) fail(name, which + " is " + kind_name(d.kind) + ", not an integer");
        if (d.negative && (d.mag != 0 || d.overflow)) fail(name, which + " is negative");
        // numpy's limit (npy_intp); it also keeps offsets representable as ptrdiff_t.
        if (d.overflow || d.mag > std::uint64_t(std::numeric_limits<std::ptrdiff_t>::max()))
            fail(name, which + " is too large");
        h.shape.push_back(static_cast<std::size_t>(d.mag));
    }
    // The element count, checked step by step; zero anywhere makes the array empty.
    bool too_many = false;
    for (std::size_t d : h.shape) {
        if (d == 0) {
            h.count = 0;
            too_many = false;
            break;
        }
        if (too_many || h.count > kNpyMaxElements / d) too_many = true;
        else h.count *= d;
    }
    if (too_many)
        fail(name, "shape " + shape_str(h.shape) + " has more than " + std::to_string(kNpyMaxElements) +
                       " elements");
    h.data_bytes = h.count * h.itemsize;
    return h;
}

void check_data_size(const std::string& name, const Header& h, std::size_t found) {
    if (found == h.data_bytes) return;
    fail(name, std::string(found < h.data_bytes ? "truncated data" : "trailing data after the array") +
                   " (expected " + std::to_string(h.data_bytes) + " bytes, found " +
                   std::to_string(found) + ")");
}

// Converts the raw elements, fed in file order and in pieces, into doubles in C order.
class Decoder {
public:
    Decoder(const Header& h, double* out)
        : h_(h), out_(out), swap_(h.big_endian == host_little_endian()),
          transpose_(h.fortran && h.shape.size() > 1), index_(h.shape.size(), 0),
          stride_(h.shape.size(), 1) {
        for (std::size_t k = h.shape.size(); k-- > 1;) stride_[k - 1] = stride_[k] * h.shape[k];
    }

    // `n` bytes, a multiple of the item size.
    void feed(const char* bytes, std::size_t n) {
        assert(n % h_.itemsize == 0);
        for (std::size_t i = 0; i < n; i += h_.itemsize) {
            out_[pos_] = h_.itemsize == 4 ? load<std::uint32_t, float>(bytes + i)
                                          : load<std::uint64_t, double>(bytes + i);
            advance();
        }
    }

private:
    template <class U, class F>
    double load(const char* p) const {
        U u;
        std::memcpy(&u, p, sizeof u);
        if (swap_) u = bswap(u);
        F f;
        std::memcpy(&f, &u, sizeof f);
        return static_cast<double>(f);
    }

    // Next destination: sequential in C order; in Fortran order the first index runs fastest.
    void advance() {
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

    const Header& h_;
    double* out_;
    bool swap_, transpose_;
    std::size_t pos_ = 0;
    std::vector<std::size_t> index_, stride_;
};

NpyArray make_array(const Header& h) {
    NpyArray a;
    a.shape = h.shape;
    a.dtype = h.dtype;
    a.data.resize(h.count);
    return a;
}

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

std::string errno_text(int err) { return err ? std::strerror(err) : "unknown error"; }

// Reads exactly n bytes; a short read means the file changed under us or an I/O error.
void read_exact(const std::string& path, std::FILE* f, char* dst, std::size_t n) {
    if (n == 0) return;
    errno = 0;
    if (std::fread(dst, 1, n, f) != n) {
        if (std::ferror(f)) fail(path, "read error (" + errno_text(errno) + ")");
        fail(path, "unexpected end of file (the file changed while reading)");
    }
}

}  // namespace

std::string shape_str(const std::vector<std::size_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}


NpyArray parse_npy(const std::string& name, const char* bytes, std::size_t size) {
    std::size_t header_len = 0;
    const std::size_t start = parse_prefix(name, bytes, size, header_len);
    const Header h = parse_header(name, bytes + start, header_len);
    const std::size_t offset = start + header_len;
    check_data_size(name, h, size - offset);
    NpyArray a = make_array(h);
    Decoder(h, a.data.data()).feed(bytes + offset, h.data_bytes);
    return a;
}

namespace {

// An open .npy file with its checked header, positioned at the data.
struct OpenNpy {
    FilePtr f;
    Header h;
};

OpenNpy open_npy(const std::string& path) {
    // Regular files only: a FIFO would block the open, /dev/zero never end.
    const RegularFile rf = open_regular_file(path, ".npy file");
    FilePtr f(::fdopen(rf.fd, "rb"));
    if (!f) {
        const int err = errno;
        ::close(rf.fd);
        fail(path, "cannot open (" + errno_text(err) + ")");
    }
    const std::size_t size = rf.size;

    // Prefix, then the header text (at most kMaxHeaderLen bytes, within the file); the data
    // size must match the file size before anything is sized from the header.
    char head[12];
    const std::size_t head_len = std::min(size, sizeof head);
    read_exact(path, f.get(), head, head_len);
    std::size_t header_len = 0;
    const std::size_t start = parse_prefix(path, head, size, header_len);
    std::string text(header_len, '\0');
    if (std::fseek(f.get(), static_cast<long>(start), SEEK_SET) != 0)
        fail(path, "read error (" + errno_text(errno) + ")");
    read_exact(path, f.get(), &text[0], header_len);
    Header h = parse_header(path, text.data(), text.size());
    check_data_size(path, h, size - start - header_len);
    return {std::move(f), std::move(h)};
}

}  // namespace

NpyHeader read_npy_header(const std::string& path) {
    const OpenNpy o = open_npy(path);
    return {o.h.shape, o.h.dtype};
}

NpyArray read_npy(const std::string& path) {
    OpenNpy o = open_npy(path);
    const Header& h = o.h;
    // The data in chunks, converted as it comes.
    NpyArray a = make_array(h);
    Decoder dec(h, a.data.data());
    std::vector<char> chunk(std::min<std::size_t>(h.data_bytes, std::size_t(1) << 20));
    for (std::size_t left = h.data_bytes; left > 0;) {
        const std::size_t n = std::min(left, chunk.size());   // a multiple of the item size
        read_exact(path, o.f.get(), chunk.data(), n);
        dec.feed(chunk.data(), n);
        left -= n;
    }
    if (std::fgetc(o.f.get()) != EOF) fail(path, "trailing data after the array (the file grew while reading)");
    return a;
}

std::optional<std::size_t> first_nonfinite(const NpyArray& a) {
    for (std::size_t i = 0; i < a.data.size(); ++i)
        if (!std::isfinite(a.data[i])) return i;
    return std::nullopt;
}

void write_npy(const std::string& path, const std::vector<std::size_t>& shape, const double* data,
               bool as_float32) {
    write_file_atomic(path, npy_bytes(path, shape, data, as_float32));
}

std::string npy_bytes(const std::string& path, const std::vector<std::size_t>& shape, const double* data,
                      bool as_float32) {
    std::size_t count = 1;
    for (std::size_t d : shape) {
        if (d != 0 && count > std::numeric_limits<std::size_t>::max() / 8 / d)
            fail(path, "cannot write: shape " + shape_str(shape) + " is too large");
        count *= d;
    }
    assert(count == 0 || data != nullptr);

    // Header as numpy writes it: dict, spaces, '\n', the whole prefix a multiple of 64 bytes.
    std::string dict = std::string("{'descr': '") + (as_float32 ? "<f4" : "<f8") +
                       "', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
    const bool v2 = dict.size() + 1 + 10 > 65535;
    const std::size_t prefix = v2 ? 12 : 10;
    const std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
    dict.append(total - prefix - dict.size() - 1, ' ');
    dict += '\n';
    std::string head(kMagic, kMagicLen);
    head += static_cast<char>(v2 ? 2 : 1);
    head += '\0';
    for (std::size_t i = 0; i < prefix - 8; ++i) head += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
    head += dict;

    const bool swap = !host_little_endian();
    const std::size_t itemsize = as_float32 ? 4 : 8;
    std::string bytes = head;
    bytes.resize(head.size() + count * itemsize);
    char* out = bytes.data() + head.size();
    for (std::size_t i = 0; i < count; ++i) {
        if (as_float32) {
            const float x = static_cast<float>(data[i]);
            std::uint32_t u;
            std::memcpy(&u, &x, 4);
            if (swap) u = bswap(u);
            std::memcpy(out + i * 4, &u, 4);
        } else {
            std::uint64_t u;
            std::memcpy(&u, &data[i], 8);
            if (swap) u = bswap(u);
            std::memcpy(out + i * 8, &u, 8);
        }
    }
    return bytes;
}

}  // namespace favor
