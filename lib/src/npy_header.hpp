#pragma once
// Internal to lib/src (not installed): the .npy layout shared by the header parser
// (npy_header.cpp), the reader (npy_read.cpp) and the writer (npy_write.cpp).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace favor::npy {

inline constexpr char kMagic[] = "\x93NUMPY";
inline constexpr std::size_t kMagicLen = 6;

// Throws favor::Error "<name>: <what>".
[[noreturn]] void fail(const std::string& name, const std::string& what);

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

// A checked header: what the data section holds and how it is laid out.
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
std::size_t parse_prefix(const std::string& name, const char* head, std::size_t size, std::size_t& header_len);
// The header text (a Python dict literal of len bytes): descr, fortran_order and shape, each
// checked (supported dtype, at most 64 dimensions, at most kNpyMaxElements elements).
Header parse_header(const std::string& name, const char* text, std::size_t len);
// Fails unless `found` bytes of data are exactly what the header announces.
void check_data_size(const std::string& name, const Header& h, std::size_t found);

}  // namespace favor::npy
