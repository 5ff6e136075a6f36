// The .npy reader (npy.hpp): a regular file only, its header checked by npy_header.cpp and
// its data size matched against the file size before any buffer is sized from the header;
// the data converted to double in C order as it is read, in chunks.
#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include <unistd.h>

#include "favor/error.hpp"
#include "favor/files.hpp"
#include "favor/npy.hpp"
#include "npy_header.hpp"

namespace favor {
namespace {

using npy::bswap;
using npy::check_data_size;
using npy::fail;
using npy::Header;
using npy::host_little_endian;
using npy::parse_header;
using npy::parse_prefix;

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

}  // namespace favor
