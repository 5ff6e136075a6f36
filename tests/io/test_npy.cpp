// The .npy reader and writer: round trips, the malformed corpus (tests/data/npy_bad, made by
// scripts/make_npy_corpus.py), unusual valid files, and interop with numpy both ways.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "corpus.hpp"
#include "helpers.hpp"
#include "temp_dir.hpp"
#include "favor/core/error.hpp"
#include "favor/io/npy.hpp"

using namespace favor;
namespace fs = std::filesystem;

namespace {

using favor_test::TempDir;

const fs::path kData = FAVOR_TEST_DATA_DIR;

std::string slurp(const fs::path& p) { return favor_test::slurp(p.string()); }

void spit(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::uint64_t bits(double x) {
    std::uint64_t u;
    std::memcpy(&u, &x, 8);
    return u;
}

std::size_t numel(const std::vector<std::size_t>& shape) {
    return std::accumulate(shape.begin(), shape.end(), std::size_t(1), std::multiplies<>());
}

// Values that exercise the conversions: signed zeros, infinities, NaN, subnormals, extremes.
std::vector<double> test_values(std::size_t n) {
    const double special[] = {0.0, -0.0, 1.0, -1.5, INFINITY, -INFINITY, NAN, 5e-324,
                              1.401298464324817e-45, 3.4028234663852886e38, 1e300, 0.1};
    std::vector<double> v(n);
    std::uint64_t s = 12345;
    for (std::size_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = i < std::size(special) ? special[i]
                                      : (double(s >> 11) * 0x1p-53 - 0.5) * std::pow(10.0, double(i % 40) - 20);
    }
    return v;
}

// The value read back from a float32 file: rounded once to float.
double as_stored(double x, bool f32) { return f32 ? double(static_cast<float>(x)) : x; }

std::vector<std::string> npy_files(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".npy") out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::string> manifest_lines(const fs::path& p) { return favor_test::manifest_lines(p.string()); }

// A manifest line "name dtype dim dim ...": the file (or base name), its dtype and shape.
struct ManifestEntry {
    std::string name, dtype;
    std::vector<std::size_t> shape;
};

ManifestEntry parse_manifest_entry(const std::string& line) {
    ManifestEntry e;
    std::istringstream in(line);
    in >> e.name >> e.dtype;
    for (std::size_t d; in >> d;) e.shape.push_back(d);
    return e;
}

using favor_test::error_of;   // "" when nothing is thrown: every check below then fails

int run(const std::string& cmd) {
    const int rc = std::system(cmd.c_str());
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

std::string python() {
    const char* env = std::getenv("FAVOR_PYTHON");
    return env && *env ? env : "/usr/bin/python3";
}

}  // namespace

TEST_CASE("write_npy then read_npy is bit-exact", "[npy]") {
    TempDir dir("roundtrip");
    const bool f32 = GENERATE(false, true);
    const auto shape = GENERATE(std::vector<std::size_t>{7, 5}, std::vector<std::size_t>{3, 7, 5},
                                std::vector<std::size_t>{2, 3, 7, 5}, std::vector<std::size_t>{1, 1},
                                std::vector<std::size_t>{4}, std::vector<std::size_t>{},
                                std::vector<std::size_t>{0, 5}, std::vector<std::size_t>{150, 1000});
    CAPTURE(f32, shape);
    const auto values = test_values(numel(shape));
    const std::string path = (dir.path / "x.npy").string();
    write_npy(path, shape, values.data(), f32);

    const NpyArray a = read_npy(path);
    REQUIRE(a.shape == shape);
    REQUIRE(a.dtype == (f32 ? "<f4" : "<f8"));
    REQUIRE(a.data.size() == values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        CAPTURE(i);
        REQUIRE(bits(a.data[i]) == bits(as_stored(values[i], f32)));
    }
    // The in-memory parser agrees, and the temporary file is gone.
    const std::string image = slurp(path);
    REQUIRE(parse_npy("x.npy", image.data(), image.size()).data.size() == values.size());
    REQUIRE(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("write_npy writes numpy's layout", "[npy]") {
    TempDir dir("layout");
    const std::string path = (dir.path / "x.npy").string();
    const std::vector<double> v = {1, 2, 3, 4, 5, 6};
    write_npy(path, {2, 3}, v.data(), false);
    const std::string s = slurp(path);
    REQUIRE(s.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    const std::size_t hlen = std::uint8_t(s[8]) | std::size_t(std::uint8_t(s[9])) << 8;
    REQUIRE((10 + hlen) % 64 == 0);
    REQUIRE(s.size() == 10 + hlen + 48);
    const std::string header = s.substr(10, hlen);
    REQUIRE(header.rfind("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 0) == 0);
    REQUIRE(header.back() == '\n');

    write_npy(path, {3}, v.data(), true);   // overwrites
    REQUIRE(slurp(path).find("'shape': (3,)") != std::string::npos);
    write_npy(path, {}, v.data(), true);
    REQUIRE(slurp(path).find("'shape': ()") != std::string::npos);
}

TEST_CASE("write_npy failures name the path and leave no temporary file", "[npy]") {
    TempDir dir("writefail");
    const std::vector<double> v = {1, 2};
    const std::string missing = (dir.path / "no_such_dir" / "x.npy").string();
    const std::string msg = error_of([&] { write_npy(missing, {2}, v.data(), false); });
    CHECK(msg.rfind(missing + ": cannot write", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);

    // The target is a directory: refused before the temporary file is written (output_target).
    const fs::path target = dir.path / "taken.npy";
    fs::create_directories(target / "inside");
    const std::string msg2 = error_of([&] { write_npy(target.string(), {2}, v.data(), false); });
    CHECK(msg2.rfind(target.string() + ": is a directory, not a regular file", 0) == 0);
    CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);

    const std::vector<std::size_t> huge = {std::size_t(1) << 40, std::size_t(1) << 40};
    CHECK(error_of([&] { write_npy((dir.path / "h.npy").string(), huge, v.data(), false); })
              .find("too large") != std::string::npos);
}

TEST_CASE("read_npy file errors", "[npy]") {
    TempDir dir("readfail");
    const std::string missing = (dir.path / "nope.npy").string();
    CHECK(error_of([&] { read_npy(missing); }) == missing + ": cannot open .npy file (No such file or directory)");
    CHECK(error_of([&] { read_npy(dir.path.string()); }).rfind(dir.path.string() + ": is a directory", 0) == 0);
    // Special files are refused before they are opened: a FIFO would block, /dev/zero never end.
    const std::string fifo = (dir.path / "fifo.npy").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(error_of([&] { read_npy(fifo); }) == fifo + ": is a FIFO, not a regular file (expected a .npy file)");
    CHECK(error_of([&] { read_npy_header(fifo); }).find("is a FIFO") != std::string::npos);
    CHECK(error_of([&] { read_npy("/dev/zero"); }).rfind("/dev/zero: is a character device", 0) == 0);
}

TEST_CASE("every malformed file throws a one-line error naming the file", "[npy]") {
    const fs::path bad = kData / "npy_bad";
    std::map<std::string, std::string> expected;   // file -> fragment of the message
    for (const auto& line : manifest_lines(bad / "expected.txt")) {
        const auto tab = line.find('\t');
        REQUIRE(tab != std::string::npos);
        expected[line.substr(0, tab)] = line.substr(tab + 1);
    }
    const auto files = npy_files(bad);
    REQUIRE(files.size() >= 40);
    REQUIRE(files.size() == expected.size());

    const std::string file = GENERATE_COPY(from_range(files));
    CAPTURE(file);
    REQUIRE(expected.count(file) == 1);
    const std::string path = (bad / file).string();
    const std::string msg = error_of([&] { read_npy(path); });
    CAPTURE(msg);
    CHECK(msg.rfind(path + ": ", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(msg.find(expected[file]) != std::string::npos);

    // The in-memory parser gives the same message.
    const std::string image = slurp(bad / file);
    CHECK(error_of([&] { parse_npy(path, image.data(), image.size()); }) == msg);
}

TEST_CASE("unusual but valid files are read", "[npy]") {
    const fs::path good = kData / "npy_good";
    const auto lines = manifest_lines(good / "manifest.txt");
    REQUIRE(lines.size() == npy_files(good).size());
    const std::string line = GENERATE_COPY(from_range(lines));
    CAPTURE(line);
    const ManifestEntry e = parse_manifest_entry(line);
    const NpyArray a = read_npy((good / e.name).string());
    CHECK(a.dtype == e.dtype);
    CHECK(a.shape == e.shape);
    REQUIRE(a.data.size() == numel(e.shape));
    for (std::size_t i = 0; i < a.data.size(); ++i) REQUIRE(a.data[i] == double(i));   // C order
    CHECK(!first_nonfinite(a));
}

TEST_CASE("NaN and inf are parsed, first_nonfinite finds them", "[npy]") {
    const fs::path dir = kData / "npy_nan";
    const auto files = npy_files(dir);
    REQUIRE(files.size() >= 4);
    for (const auto& file : files) {
        CAPTURE(file);
        const NpyArray a = read_npy((dir / file).string());
        CHECK(first_nonfinite(a));
    }
    const NpyArray f = read_npy((dir / "nan_fortran_f8_2x2.npy").string());
    CHECK(f.data[0] == 1.0);
    CHECK(f.data[1] == 3.0);   // transposed to C order
    CHECK(std::isnan(f.data[3]));
}

TEST_CASE("every truncation and extension of a valid file is rejected", "[npy]") {
    TempDir dir("truncate");
    const std::string path = (dir.path / "t.npy").string();
    const auto values = test_values(12);
    write_npy(path, {3, 4}, values.data(), true);
    std::string image = slurp(path);
    REQUIRE_NOTHROW(parse_npy("t.npy", image.data(), image.size()));
    for (std::size_t n = 0; n < image.size(); ++n) {
        CAPTURE(n);
        const std::string cut = image.substr(0, n);   // a fresh buffer: ASan sees overreads
        const std::string msg = error_of([&] { parse_npy("t.npy", cut.data(), cut.size()); });
        REQUIRE(msg.rfind("t.npy: ", 0) == 0);
        REQUIRE(msg.find('\n') == std::string::npos);
    }
    image += '\0';
    CHECK(error_of([&] { parse_npy("t.npy", image.data(), image.size()); }).find("trailing data") !=
          std::string::npos);
    spit(path, image);
    CHECK(error_of([&] { read_npy(path); }).find("trailing data") != std::string::npos);
}

// numpy writes every layout it can; read_npy must get the same bits. Then numpy loads what
// write_npy wrote. Requires /usr/bin/python3 with numpy (or $FAVOR_PYTHON).
TEST_CASE("numpy interop", "[npy][numpy]") {
    const std::string script = std::string(FAVOR_SOURCE_DIR) + "/tests/io/npy_numpy_check.py";
    const std::string py = "'" + python() + "' '" + script + "' ";

    SECTION("numpy writes, read_npy reads") {
        TempDir dir("from_numpy");
        REQUIRE(run(py + "write '" + dir.path.string() + "'") == 0);
        const auto lines = manifest_lines(dir.path / "manifest.txt");
        REQUIRE(lines.size() >= 10);
        for (const auto& line : lines) {
            CAPTURE(line);
            const ManifestEntry e = parse_manifest_entry(line);
            const NpyArray a = read_npy((dir.path / (e.name + ".npy")).string());
            CHECK(a.dtype == e.dtype);
            CHECK(a.shape == e.shape);
            const std::string want = slurp(dir.path / (e.name + ".expected"));
            REQUIRE(want.size() == a.data.size() * 8);
            std::size_t differ = 0;
            for (std::size_t i = 0; i < a.data.size(); ++i) {
                std::uint64_t w;
                std::memcpy(&w, want.data() + 8 * i, 8);   // little-endian host assumed (x86/arm)
                differ += w != bits(a.data[i]);
            }
            CHECK(differ == 0);
        }
    }

    SECTION("write_npy writes, numpy reads") {
        TempDir dir("to_numpy");
        const std::vector<std::vector<std::size_t>> shapes = {{6, 4}, {2, 6, 4}, {2, 3, 6, 4}, {5}, {}, {0, 3}};
        std::ofstream manifest(dir.path / "manifest.txt");
        int k = 0;
        for (const bool f32 : {false, true}) {
            for (const auto& shape : shapes) {
                const std::string name = "case" + std::to_string(k++);
                const auto values = test_values(numel(shape));
                write_npy((dir.path / (name + ".npy")).string(), shape, values.data(), f32);
                std::string want;
                for (double x : values) {
                    const double s = as_stored(x, f32);
                    want.append(reinterpret_cast<const char*>(&s), 8);
                }
                spit(dir.path / (name + ".expected"), want);
                manifest << name << (f32 ? " <f4" : " <f8");
                for (std::size_t d : shape) manifest << ' ' << d;
                manifest << '\n';
            }
        }
        manifest.close();
        REQUIRE(run(py + "check '" + dir.path.string() + "'") == 0);
    }
}
