// The .npy reader (npy.hpp): a regular file only, its header checked by npy_header.cpp and
// its data size matched against the file size before any buffer is sized from the header;
// the data converted to double in C order as it is read, in chunks (npy_header.cpp).
#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include <unistd.h>

#include "favor/core/error.hpp"
#include "favor/io/files.hpp"
#include "favor/io/npy.hpp"
#include "io/npy_header.hpp"

namespace favor {
namespace {

using npy::check_data_size;
using npy::Decoder;
using npy::fail;
using npy::Header;
using npy::parse_header;
using npy::parse_prefix;

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

// A .npy file read front to back (header only, or whole).
NpyArray read_npy_file(const std::string& path, bool header_only) {
    // Regular files only: a FIFO would block the open, /dev/zero never end.
    const RegularFile rf = open_regular_file(path, ".npy file");
    FilePtr f(::fdopen(rf.fd, "rb"));
    if (!f) {
        const int err = errno;
        ::close(rf.fd);
        fail(path, "cannot open (" + errno_text(err) + ")");
    }
    NpyArray a = npy::read_npy_stream(
        path, rf.size, [&](char* dst, std::size_t n) { read_exact(path, f.get(), dst, n); }, header_only);
    if (!header_only && std::fgetc(f.get()) != EOF)
        fail(path, "trailing data after the array (the file grew while reading)");
    return a;
}

}  // namespace

NpyHeader read_npy_header(const std::string& path) {
    const NpyArray a = read_npy_file(path, true);
    return {a.shape, a.dtype};
}

NpyArray read_npy(const std::string& path) { return read_npy_file(path, false); }

std::optional<std::size_t> first_nonfinite(const NpyArray& a) {
    for (std::size_t i = 0; i < a.data.size(); ++i)
        if (!std::isfinite(a.data[i])) return i;
    return std::nullopt;
}

}  // namespace favor
