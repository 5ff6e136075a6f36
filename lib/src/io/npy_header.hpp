#pragma once
// Internal to lib/src (not installed): the .npy layout shared by the header parser
// (npy_header.cpp), the reader (npy_read.cpp) and the writer (npy_write.cpp), and the element
// decoding the .npz and .safetensors readers share with them (tensor_file.hpp).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "favor/io/npy.hpp"

namespace favor::npy {

inline constexpr char kMagic[] = "\x93NUMPY";
inline constexpr std::size_t kMagicLen = 6;

// Throws favor::Error "<name>: <what>".
[[noreturn]] void fail(const std::string& name, const std::string& what);
// The names a container holds, for "no array 'x' (the archive holds: a, b)": "nothing", or
// the first 20 joined by ", " and then "... (N in all)", so the line stays short for a
// checkpoint of a million tensors.
std::string held_names(const std::vector<std::string>& names);

inline bool host_little_endian() {
    const std::uint16_t one = 1;
    unsigned char first;
    std::memcpy(&first, &one, 1);
    return first == 1;
}
inline std::uint32_t bswap(std::uint32_t x) {
    return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}
inline std::uint64_t bswap(std::uint64_t x) {
    return (std::uint64_t(bswap(std::uint32_t(x))) << 32) | bswap(std::uint32_t(x >> 32));
}

// The element types favor reads: IEEE binary16, bfloat16 (the top half of a float32), float32,
// float64. Every one converts to double exactly.
enum class Elem { f16, bf16, f32, f64 };
inline std::size_t elem_size(Elem e) { return e == Elem::f64 ? 8 : e == Elem::f32 ? 4 : 2; }

// A checked header: what the data section holds and how it is laid out.
struct Header {
    std::string dtype;
    bool fortran = false;
    bool big_endian = false;
    Elem elem = Elem::f64;
    std::size_t itemsize = 0;
    std::vector<std::size_t> shape;
    std::size_t count = 1;        // prod(shape)
    std::size_t data_bytes = 0;   // count * itemsize
};

// The fixed prefix: magic, version, header length. `head` holds the first min(size, 12) bytes
// of a file of `size` bytes. Returns the offset of the header text and sets its length.
std::size_t parse_prefix(const std::string& name, const char* head, std::size_t size, std::size_t& header_len);
// The header text (a Python dict literal of len bytes): descr, fortran_order and shape, each
// checked (supported dtype, at most 64 dimensions, at most kNpyMaxElements elements).
Header parse_header(const std::string& name, const char* text, std::size_t len);
// Fails unless `found` bytes of data are exactly what the header announces.
void check_data_size(const std::string& name, const Header& h, std::size_t found);

// One element's bytes (h.elem, byte order h.big_endian) as a double: exact for every type.
double load_elem(const Header& h, const char* p);

// Converts the raw elements, fed in file order and in pieces of whole elements, into doubles in
// C order (Fortran order transposed as it comes). Shared by .npy, .npz and .safetensors.
class Decoder {
public:
    Decoder(const Header& h, double* out);
    // `n` bytes, a multiple of the item size.
    void feed(const char* bytes, std::size_t n);

private:
    void advance();
    const Header& h_;
    double* out_;
    bool transpose_;
    std::size_t pos_ = 0;
    std::vector<std::size_t> index_, stride_;
};

// A sequential byte stream: reads exactly n bytes into dst or throws favor::Error.
using ReadExact = std::function<void(char* dst, std::size_t n)>;
// A .npy image of `size` bytes read front to back through `read`: prefix and header checked,
// the data size matched against `size` before anything is sized from the header. With
// `header_only` the data is not read (the array's data is left empty).
NpyArray read_npy_stream(const std::string& name, std::size_t size, const ReadExact& read, bool header_only);

// The containers (npz_read.cpp, safetensors_read.cpp): one array of the file at `path`.
NpyArray read_npz(const std::string& path, const std::string& member, bool header_only);
NpyArray read_safetensors(const std::string& path, const std::string& member, bool header_only);

}  // namespace favor::npy
