#pragma once
// Internal to lib/src: random access to the bytes of a tensor container (a regular file read
// with pread, or an image in memory), for the .npz and .safetensors readers. Callers keep
// every read within [0, size): they check offsets against size before reading.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <unistd.h>

#include "favor/io/files.hpp"
#include "io/npy_header.hpp"

namespace favor::npy {

class ByteSource {
public:
    // A regular file (FIFOs and devices refused before the open), closed on destruction.
    ByteSource(const std::string& path, const std::string& what) : name_(path) {
        const RegularFile rf = open_regular_file(path, what);
        fd_ = rf.fd;
        size_ = rf.size;
    }
    ByteSource(const std::string& name, const char* bytes, std::size_t size) : name_(name), bytes_(bytes), size_(size) {}
    ~ByteSource() {
        if (fd_ >= 0) ::close(fd_);
    }
    ByteSource(const ByteSource&) = delete;
    ByteSource& operator=(const ByteSource&) = delete;

    const std::string& name() const { return name_; }
    std::uint64_t size() const { return size_; }
    // Exactly n bytes at `offset` (offset + n <= size, checked by the caller).
    void read_at(std::uint64_t offset, char* dst, std::size_t n) const {
        if (n == 0) return;
        if (offset > size_ || n > size_ - offset) fail(name_, "internal error: read beyond the end");
        if (bytes_) {
            std::memcpy(dst, bytes_ + offset, n);
            return;
        }
        while (n > 0) {
            const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) fail(name_, std::string("read error (") + std::strerror(errno) + ")");
            if (got == 0) fail(name_, "unexpected end of file (the file changed while reading)");
            dst += got, offset += std::uint64_t(got), n -= std::size_t(got);
        }
    }
    std::string read_string(std::uint64_t offset, std::size_t n) const {
        std::string s(n, '\0');
        read_at(offset, &s[0], n);
        return s;
    }

private:
    std::string name_;
    const char* bytes_ = nullptr;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

// Little-endian integers from bytes.
inline std::uint64_t le(const char* p, int bytes) {
    std::uint64_t v = 0;
    for (int i = bytes; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
}

}  // namespace favor::npy
