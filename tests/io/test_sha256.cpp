// SHA-256 (sha256.hpp): the FIPS 180-4 / NIST example vectors, every split of one message into
// update() calls (the block buffer), lengths around the padding's 55/56/64-byte edges against
// a one-call digest, and files (read in 1 MiB pieces) against the digest of their bytes.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "helpers.hpp"
#include "favor/io/sha256.hpp"

using namespace favor;

TEST_CASE("SHA-256 gives the NIST example digests", "[sha256]") {
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu") ==
          "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256 does not depend on how the bytes are split", "[sha256]") {
    std::string msg;
    for (int i = 0; i < 300; ++i) msg += char((i * 37 + 11) & 0xff);
    for (std::size_t len : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 300}) {
        const std::string whole = sha256_hex(msg.substr(0, len));
        for (std::size_t cut = 0; cut <= len; cut += 7) {
            Sha256 s;
            s.update(msg.data(), cut);
            for (std::size_t i = cut; i < len; ++i) s.update(msg.data() + i, 1);
            CAPTURE(len, cut);
            CHECK(s.hex() == whole);
        }
    }
    CHECK(sha256_hex(msg.substr(0, 55)) != sha256_hex(msg.substr(0, 56)));
}

TEST_CASE("file_sha256: the digest of the file's bytes and their count, errors naming the file", "[sha256]") {
    const std::string path = (std::filesystem::temp_directory_path() / ("favor_sha_" + std::to_string(getpid()))).string();
    std::string bytes((std::size_t(1) << 20) + 12345, '\0');   // past one read piece
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = char((i * 2654435761u) >> 13);
    {
        std::ofstream out(path, std::ios::binary);
        out << bytes;
    }
    const FileDigest d = file_sha256(path, "tensor file");
    CHECK(d.bytes == bytes.size());
    CHECK(d.sha256 == sha256_hex(bytes));
    bytes[bytes.size() / 2] ^= 1;   // one bit: another digest
    CHECK(d.sha256 != sha256_hex(bytes));
    std::remove(path.c_str());
    CHECK(favor_test::error_of([&] { file_sha256(path, "tensor file"); }) ==
          path + ": cannot open tensor file (No such file or directory)");
    CHECK(favor_test::error_of([] { file_sha256("/", "tensor file"); }) == "/: is a directory, not a regular file (expected a tensor file)");
}
