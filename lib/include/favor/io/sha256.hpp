#pragma once
// SHA-256 (FIPS 180-4): the content identity of a run's input files in its journal
// (docs/design.md section 6, "Resume"), so a replaced or rewritten input is found whatever
// its size and modification time.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace favor {

class Sha256 {
public:
    Sha256();
    void update(const void* data, std::size_t n);
    // The digest as 64 lowercase hex digits; the object is spent afterwards.
    std::string hex();

private:
    std::array<std::uint32_t, 8> h_;
    std::array<unsigned char, 64> block_{};
    std::size_t fill_ = 0;
    std::uint64_t bytes_ = 0;
    void compress(const unsigned char* p);
};

std::string sha256_hex(const std::string& bytes);

// The SHA-256 of a regular file's content (read in 1 MiB pieces) and its size; Error naming
// the file as open_regular_file does ("<path>: cannot open <what> (...)"), or on a read error,
// or if the file changes size while it is read.
struct FileDigest {
    std::uint64_t bytes = 0;
    std::string sha256;
};
FileDigest file_sha256(const std::string& path, const std::string& what);

}  // namespace favor
