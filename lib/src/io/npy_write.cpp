// The .npy writer (npy.hpp): little-endian, C order, the header padded as numpy pads it;
// written atomically (files.hpp).
#include <cassert>
#include <cstdint>
#include <cstring>
#include <limits>

#include "favor/io/files.hpp"
#include "favor/io/npy.hpp"
#include "io/npy_header.hpp"

namespace favor {

using npy::bswap;
using npy::fail;
using npy::host_little_endian;
using npy::kMagic;
using npy::kMagicLen;

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