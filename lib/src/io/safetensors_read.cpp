// The .safetensors reader (tensor_file.hpp): an 8-byte little-endian header length, a JSON
// header (parsed by json_text.hpp without comments: no NUL byte, no repeated key, nesting
// bounded), then the data, all tensors little-endian in C order. Every entry is checked, not
// only the one read: known dtype, shape, offsets within the data, the byte count its shape
// needs, and together the entries cover the data exactly (no gap, no overlap, nothing after),
// as the format's specification requires. F16, BF16, F32 and F64 tensors can be read.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/byte_source.hpp"
#include "favor/core/error.hpp"
#include "favor/io/json_text.hpp"
#include "favor/io/tensor_file.hpp"
#include "io/npy_header.hpp"

namespace favor {
namespace {

using nlohmann::json;
using npy::ByteSource;
using npy::fail;

struct Entry {
    std::string name, dtype;
    std::vector<std::size_t> shape;
    std::uint64_t begin = 0, end = 0;
};

// Bytes per element of the format's dtypes (sub-byte types are not read).
std::size_t dtype_size(const std::string& t) {
    static const std::pair<const char*, std::size_t> sizes[] = {
        {"BOOL", 1}, {"U8", 1}, {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},  {"U16", 2}, {"F16", 2},
        {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8},  {"F64", 8}};
    for (const auto& [name, size] : sizes)
        if (t == name) return size;
    return 0;
}

std::uint64_t read_u64(const std::string& n, const json& v, const std::string& what) {
    if (!v.is_number_unsigned()) fail(n, what + " is not a non-negative integer");
    return v.get<std::uint64_t>();
}

Entry read_entry(const std::string& n, const std::string& key, const json& v, std::uint64_t data_size) {
    const std::string who = "tensor '" + key + "'";
    if (!v.is_object()) fail(n, who + " is not an object");
    for (const auto& [k, _] : v.items())
        if (k != "dtype" && k != "shape" && k != "data_offsets") fail(n, who + ": unexpected key '" + k + "'");
    for (const char* k : {"dtype", "shape", "data_offsets"})
        if (!v.contains(k)) fail(n, who + ": missing '" + k + "'");
    Entry e;
    e.name = key;
    if (!v["dtype"].is_string()) fail(n, who + ": dtype is not a string");
    e.dtype = v["dtype"].get<std::string>();
    const std::size_t item = dtype_size(e.dtype);
    if (item == 0) fail(n, who + ": unknown dtype '" + e.dtype + "'");
    const json& shape = v["shape"];
    if (!shape.is_array() || shape.size() > 64) fail(n, who + ": shape is not a list of at most 64 integers");
    std::uint64_t bytes = item;
    bool too_large = false;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        const std::uint64_t d = read_u64(n, shape[i], who + ": shape[" + std::to_string(i) + "]");
        if (d > std::uint64_t(std::numeric_limits<std::ptrdiff_t>::max())) too_large = true;
        else if (d != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / d) too_large = true;
        else bytes *= d;
        e.shape.push_back(std::size_t(d));
    }
    if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) bytes = 0, too_large = false;
    if (too_large) fail(n, who + ": shape " + shape_str(e.shape) + " is too large");
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2) fail(n, who + ": data_offsets is not a list [begin, end]");
    e.begin = read_u64(n, off[0], who + ": data_offsets[0]");
    e.end = read_u64(n, off[1], who + ": data_offsets[1]");
    const std::string span = "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.begin > e.end || e.end > data_size)
        fail(n, who + ": " + span + " outside the data (" + std::to_string(data_size) + " bytes)");
    if (e.end - e.begin != bytes)
        fail(n, who + ": " + span + " hold " + std::to_string(e.end - e.begin) + " bytes, shape " + shape_str(e.shape) +
                    " of " + e.dtype + " needs " + std::to_string(bytes));
    return e;
}

// The header's entries and where the data starts; the entries cover the data exactly.
std::vector<Entry> read_header(const ByteSource& src, std::uint64_t& data_start) {
    const std::string& n = src.name();
    if (src.size() < 8) fail(n, "not a .safetensors file (" + std::to_string(src.size()) + " bytes, no header length)");
    const std::string len_bytes = src.read_string(0, 8);
    const std::uint64_t len = npy::le(len_bytes.data(), 8);
    if (len > kSafetensorsMaxHeaderBytes)
        fail(n, "header length " + std::to_string(len) + " exceeds the limit of " + std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
    if (len > src.size() - 8)
        fail(n, "header length " + std::to_string(len) + " goes beyond the end of the file (" + std::to_string(src.size()) + " bytes)");
    const std::string text = src.read_string(8, std::size_t(len));
    if (text.empty() || text[0] != '{') fail(n, "not a .safetensors file (the header does not start with '{')");
    const json j = parse_json_text(text, n + ": header", false);
    if (!j.is_object()) fail(n, "header is not a JSON object");
    data_start = 8 + len;
    const std::uint64_t data_size = src.size() - data_start;
    std::vector<Entry> entries;
    for (const auto& [key, v] : j.items()) {
        if (key != "__metadata__") {
            entries.push_back(read_entry(n, key, v, data_size));
            continue;
        }
        if (!v.is_object()) fail(n, "__metadata__ is not an object");
        for (const auto& [mk, mv] : v.items())
            if (!mv.is_string()) fail(n, "__metadata__: '" + mk + "' is not a string");
    }
    std::vector<const Entry*> order;
    for (const Entry& e : entries) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    std::uint64_t at = 0;
    for (const Entry* e : order) {
        if (e->begin != at)
            fail(n, "tensor '" + e->name + "' starts at data byte " + std::to_string(e->begin) + ", expected " +
                        std::to_string(at) + " (tensors must cover the data without gap or overlap)");
        at = e->end;
    }
    if (at != data_size)
        fail(n, std::to_string(data_size - at) + " bytes after the last tensor's data (expected none)");
    return entries;
}

npy::Header decode_header(const std::string& name, const Entry& e) {
    npy::Header h;
    h.dtype = e.dtype;
    if (e.dtype == "F16") h.elem = npy::Elem::f16;
    else if (e.dtype == "BF16") h.elem = npy::Elem::bf16;
    else if (e.dtype == "F32") h.elem = npy::Elem::f32;
    else if (e.dtype == "F64") h.elem = npy::Elem::f64;
    else fail(name, "unsupported dtype " + e.dtype + " (supported: F16, BF16, F32, F64)");
    h.itemsize = npy::elem_size(h.elem);
    h.shape = e.shape;
    h.count = h.itemsize ? std::size_t((e.end - e.begin) / h.itemsize) : 0;
    if (h.count > kNpyMaxElements)
        fail(name, "shape " + shape_str(e.shape) + " has more than " + std::to_string(kNpyMaxElements) + " elements");
    h.data_bytes = std::size_t(e.end - e.begin);
    return h;
}

NpyArray read_entry_data(const ByteSource& src, const std::string& tensor, bool header_only) {
    std::uint64_t start = 0;
    const std::vector<Entry> entries = read_header(src, start);
    const auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == tensor; });
    if (it == entries.end()) {
        std::vector<std::string> names;
        for (const Entry& e : entries) names.push_back(e.name);
        fail(src.name(), "no tensor '" + tensor + "' (the file holds: " + npy::held_names(names) + ")");
    }
    const std::string name = src.name() + ":" + tensor;
    const npy::Header h = decode_header(name, *it);
    NpyArray a;
    a.shape = h.shape;
    a.dtype = h.dtype;
    if (header_only) return a;
    a.data.resize(h.count);
    npy::Decoder dec(h, a.data.data());
    std::vector<char> chunk(std::min<std::size_t>(h.data_bytes, std::size_t(1) << 20));
    for (std::uint64_t done = 0; done < h.data_bytes;) {
        const std::size_t n = std::size_t(std::min<std::uint64_t>(h.data_bytes - done, chunk.size()));
        src.read_at(start + it->begin + done, chunk.data(), n);
        dec.feed(chunk.data(), n);
        done += n;
    }
    return a;
}

}  // namespace

std::vector<std::string> safetensors_names(const std::string& name, const char* bytes, std::size_t size) {
    const ByteSource src(name, bytes, size);
    std::uint64_t start = 0;
    std::vector<std::string> out;
    for (const Entry& e : read_header(src, start)) out.push_back(e.name);
    return out;
}

NpyArray parse_safetensors(const std::string& name, const char* bytes, std::size_t size, const std::string& member) {
    return read_entry_data(ByteSource(name, bytes, size), member, false);
}

namespace npy {
NpyArray read_safetensors(const std::string& path, const std::string& member, bool header_only) {
    return read_entry_data(ByteSource(path, ".safetensors file"), member, header_only);
}
}  // namespace npy

}  // namespace favor
