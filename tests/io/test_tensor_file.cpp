// Tensor files: the .npz and .safetensors corpora (tests/data/{npz,safetensors}_{good,bad}, made
// by scripts/make_tensor_corpus.py with numpy), half-precision elements bit by bit, references
// "PATH:NAME", layouts against a naive transposition, and load_qkv's layout and row checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "corpus.hpp"
#include "helpers.hpp"
#include "favor/core/error.hpp"
#include "favor/experiments/config.hpp"
#include "favor/io/npy.hpp"
#include "favor/io/tensor_file.hpp"
#include "favor/io/tensor_io.hpp"
#include "favor/io/tensor_layout.hpp"

using namespace favor;
using favor_test::error_of;
namespace fs = std::filesystem;

namespace {

const fs::path kData = FAVOR_TEST_DATA_DIR;

NpyArray parse_image(const std::string& path, const std::string& member) {
    const std::string image = favor_test::slurp(path);
    return tensor_format(path) == TensorFormat::npz ? parse_npz(path, image.data(), image.size(), member)
                                                    : parse_safetensors(path, image.data(), image.size(), member);
}

// A .npy image of 2-byte elements with the given descr and raw little-endian values.
std::string npy2(const std::string& descr, const std::vector<std::uint16_t>& raw) {
    std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(raw.size()) + ",), }";
    dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
    dict += '\n';
    std::string s = std::string("\x93NUMPY\x01\x00", 8) + char(dict.size() & 0xff) + char(dict.size() >> 8) + dict;
    for (std::uint16_t u : raw) s += char(u & 0xff), s += char(u >> 8);
    return s;
}

// A temporary .npy file of `shape` holding 0, 1, 2, ... in C order.
struct TempNpy {
    std::string path;
    TempNpy(const std::string& tag, const std::vector<std::size_t>& shape) {
        path = (fs::temp_directory_path() / ("favor_tf_" + tag + "_" + std::to_string(getpid()) + ".npy")).string();
        std::size_t n = 1;
        for (std::size_t d : shape) n *= d;
        std::vector<double> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = double(i);
        write_npy(path, shape, v.data(), false);
    }
    ~TempNpy() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE("good .npz and .safetensors files read as numpy wrote them", "[tensor_file]") {
    for (const char* dir : {"npz_good", "safetensors_good"}) {
        const auto lines = favor_test::manifest_lines((kData / dir / "manifest.txt").string());
        REQUIRE(lines.size() >= 4);
        for (const std::string& line : lines) {
            CAPTURE(line);
            std::istringstream in(line);
            std::string file, member, dtype;
            in >> file >> member >> dtype;
            std::vector<std::size_t> shape;
            for (std::size_t d; in >> d;) shape.push_back(d);
            const TensorRef ref{(kData / dir / file).string(), member};
            const NpyArray a = read_tensor(ref);
            CHECK(a.dtype == dtype);
            CHECK(a.shape == shape);
            for (std::size_t i = 0; i < a.data.size(); ++i) REQUIRE(a.data[i] == double(i));   // C order
            CHECK(read_tensor_header(ref).shape == shape);
            const NpyArray m = parse_image(ref.path, member);   // the in-memory reader agrees
            CHECK((m.shape == a.shape && m.data == a.data));
        }
    }
}

TEST_CASE("every malformed container gives one line naming the file and what is wrong", "[tensor_file]") {
    std::size_t n = 0;
    for (const char* dir : {"npz_bad", "safetensors_bad"}) {
        for (const std::string& line : favor_test::manifest_lines((kData / dir / "expected.txt").string())) {
            const std::size_t tab = line.find('\t');
            REQUIRE(tab != std::string::npos);
            const std::string path = (kData / dir / line.substr(0, tab)).string(), fragment = line.substr(tab + 1);
            CAPTURE(path, fragment);
            const std::string msg = error_of([&] { read_tensor({path, "q"}); });
            CAPTURE(msg);
            CHECK((msg.rfind(path + ": ", 0) == 0 || msg.rfind(path + ":q: ", 0) == 0));   // the file, or its array q
            CHECK(msg.find('\n') == std::string::npos);
            CHECK(msg.find(fragment) != std::string::npos);
            CHECK(error_of([&] { parse_image(path, "q"); }) == msg);
            ++n;
        }
    }
    CHECK(n >= 50);
}

TEST_CASE("float16 and bfloat16 elements convert to double exactly", "[tensor_file]") {
    // Bits: 1, the smallest subnormal, the largest finite, -0, inf, -inf, NaN, 1/3 rounded.
    const std::vector<std::uint16_t> f16 = {0x3c00, 0x0001, 0x7bff, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x3555};
    const NpyArray h = parse_npy("h.npy", npy2("<f2", f16).data(), npy2("<f2", f16).size());
    CHECK(h.data[0] == 1.0);
    CHECK(h.data[1] == std::ldexp(1.0, -24));
    CHECK(h.data[2] == 65504.0);
    CHECK((h.data[3] == 0.0 && std::signbit(h.data[3])));
    CHECK(h.data[4] == std::numeric_limits<double>::infinity());
    CHECK(h.data[5] == -std::numeric_limits<double>::infinity());
    CHECK(std::isnan(h.data[6]));
    CHECK(h.data[7] == 1365.0 / 4096.0);   // 0x3555: (1024 + 341) * 2^-12
    // bfloat16 ('<V2', as numpy saves ml_dtypes' bfloat16): the top half of a float32.
    const std::vector<std::uint16_t> bf = {0x3f80, 0x0001, 0x7f7f, 0xc040, 0x7f80};
    const std::string img = npy2("<V2", bf);
    const NpyArray b = parse_npy("b.npy", img.data(), img.size());
    CHECK(b.data[0] == 1.0);
    CHECK(b.data[1] == std::ldexp(1.0, -133));
    CHECK(b.data[2] == std::ldexp(1.0, 128) - std::ldexp(1.0, 120));   // the largest finite bfloat16
    CHECK(b.data[3] == -3.0);
    CHECK(b.data[4] == std::numeric_limits<double>::infinity());
    // Big-endian float16.
    const std::string be = npy2(">f2", {0x003c});   // bytes 3c 00 read big-endian: 0x3c00 = 1
    CHECK(parse_npy("be.npy", be.data(), be.size()).data[0] == 1.0);
}

TEST_CASE("tensor references: PATH or PATH:NAME, the name only after .npz and .safetensors", "[tensor_file]") {
    CHECK(parse_tensor_ref("a/q.npy", "q").name() == "a/q.npy");
    CHECK(parse_tensor_ref("c:/x.npy", "q").path == "c:/x.npy");   // a colon in a .npy path is part of it
    CHECK(parse_tensor_ref("qkv.npz", "k").member == "k");
    CHECK(parse_tensor_ref("qkv.npz:keys", "k").member == "keys");
    CHECK(parse_tensor_ref("m.safetensors:layer.0.q", "q").path == "m.safetensors");
    CHECK(parse_tensor_ref("m.safetensors:layer.0.q", "q").member == "layer.0.q");
    CHECK(tensor_format("x.NPZ") == TensorFormat::npy);   // extensions are exact
}

TEST_CASE("layouts permute into (B, H, L, D) as a naive transposition does", "[tensor_file]") {
    std::string layout = GENERATE(as<std::string>{}, "BHLD", "BLHD", "LHBD", "DLHB", "HDBL", "LD", "DL", "HLD", "LHD",
                                  "BLD", "DHL");
    CAPTURE(layout);
    REQUIRE(layout_problem(layout).empty());
    const std::vector<std::size_t> sizes_of = {2, 3, 5, 4};   // B, H, L, D
    std::vector<std::size_t> shape;
    for (char c : layout) shape.push_back(sizes_of[std::string("BHLD").find(c)]);
    NpyArray a;
    a.shape = shape;
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    for (std::size_t i = 0; i < n; ++i) a.data.push_back(double(i));
    const NpyArray file = a;
    to_canonical(a, layout, "t.npy");
    // Naive: for each output index (in B, H, L, D order of the present axes), the file offset.
    std::string order;
    for (char c : std::string("BHLD"))
        if (layout.find(c) != std::string::npos) order += c;
    REQUIRE(a.shape == canonical_shape(file.shape, layout, "t.npy"));
    std::vector<std::size_t> idx(order.size(), 0);
    for (std::size_t i = 0; i < n; ++i) {
        std::size_t off = 0;
        for (std::size_t k = 0; k < layout.size(); ++k) off = off * file.shape[k] + idx[order.find(layout[k])];
        REQUIRE(a.data[i] == file.data[off]);
        for (std::size_t j = order.size(); j-- > 0;) {
            if (++idx[j] < a.shape[j]) break;
            idx[j] = 0;
        }
    }
    CHECK(error_of([&] { canonical_shape({2, 3}, "BLD", "t.npy"); }) ==
          "t.npy: shape (2, 3) has rank 2, layout \"BLD\" (B, L, d) has 3 axes");
}

TEST_CASE("bad layouts are refused with the reason", "[tensor_file]") {
    CHECK(layout_problem("BHLX").find("letters are B") != std::string::npos);
    CHECK(layout_problem("bhld").find("letters are B") != std::string::npos);
    CHECK(layout_problem("BLLD") == "axis L twice in \"BLLD\"");
    CHECK(layout_problem("BHD") == "needs the axes L and D, got \"BHD\"");
    CHECK(layout_problem("").find("needs the axes L and D") != std::string::npos);
}

TEST_CASE("load_qkv: L < H refused without a layout and accepted with one, the first rows, L < d warned", "[tensor_file]") {
    const TempNpy q("q", {1, 8, 4, 6}), v("v", {1, 8, 4, 3});   // (B, L, H, d) = (1, 8, 4, 6)
    QkvSource s;
    s.q = s.k = q.path;
    s.v = v.path;
    s.layout_field = "inputs.layout";
    const std::string msg = error_of([&] { read_qkv_shapes(s); });
    CHECK(msg.rfind(q.path + ": shape (1, 8, 4, 6) read as (B, H, L, d) gives 8 heads of L = 4 rows", 0) == 0);
    CHECK(msg.find("set inputs.layout to \"BLHD\"") != std::string::npos);
    CHECK(error_of([&] { load_qkv(s); }) == msg);
    s.layout = "BLHD";
    const QkvShapes sh = read_qkv_shapes(s);
    CHECK((sh.heads == 4 && sh.L == 8 && sh.d == 6 && sh.dv == 3 && sh.lead == std::vector<std::size_t>{1, 4}));
    CHECK(sh.warnings.empty());
    s.rows = 5;
    s.rows_field = "c.json: inputs.L";
    const HeadTensors t = load_qkv(s);
    REQUIRE(t.q.size() == 4);
    CHECK((t.file_L == 8 && t.L() == 5 && t.v[0].shape(0) == 5));
    // Head h, row l, column c of a (1, L, H, d) file: entry (l * 4 + h) * 6 + c.
    for (std::size_t h = 0; h < 4; ++h)
        for (std::size_t l = 0; l < 5; ++l) REQUIRE(t.q[h](l, 2) == double((l * 4 + h) * 6 + 2));
    s.rows = 9;
    CHECK(error_of([&] { read_qkv_shapes(s); }) ==
          "c.json: inputs.L: 9 is more than the 8 rows (L) of " + q.path + " (a tensor file gives its first L rows)");
    // An explicit BHLD reads the file as it is, with a warning for L = 4 < d = 6.
    s.rows = 0;
    s.layout = "BHLD";
    const QkvShapes as_is = read_qkv_shapes(s);
    CHECK(as_is.heads == 8);
    REQUIRE(as_is.warnings.size() == 1);
    CHECK(as_is.warnings[0].find("L = 4 rows, fewer than d = 6") != std::string::npos);
}

TEST_CASE("load_qkv: a row limit takes q's first rows, and k's and v's only when they are as long as q's", "[tensor_file]") {
    // Cross-attention files: q (2, 6, 3), k (2, 10, 3), v (2, 10, 2). inputs.L = 4 takes q's
    // first 4 rows and every key (they were cut to 4 before: issue 36); self-attention files
    // (k of q's length) take the first 4 keys and values too.
    const TempNpy q("lq", {2, 6, 3}), k("lk", {2, 10, 3}), v("lv", {2, 10, 2}), kself("lks", {2, 6, 3}),
        vself("lvs", {2, 6, 2});
    CHECK(key_rows(6, 10, 4) == 10);
    CHECK(key_rows(6, 6, 4) == 4);
    QkvSource s;
    s.q = q.path, s.k = k.path, s.v = v.path;
    s.layout_field = "inputs.layout";
    s.rows = 4;
    s.rows_field = "c.json: inputs.L";
    const QkvShapes sh = read_qkv_shapes(s);
    CHECK((sh.L == 4 && sh.Lk == 10 && sh.file_L == 6 && sh.file_Lk == 10));
    const HeadTensors t = load_qkv(s);
    REQUIRE(t.q.size() == 2);
    CHECK((t.L() == 4 && t.file_L == 6 && t.file_Lk == 10));
    for (std::size_t h = 0; h < 2; ++h) {
        REQUIRE((t.k[h].shape(0) == 10 && t.v[h].shape(0) == 10));
        CHECK(t.k[h](9, 2) == double(h * 30 + 9 * 3 + 2));   // the last key of head h
        CHECK(t.v[h](9, 1) == double(h * 20 + 9 * 2 + 1));
    }
    // Only q needs the rows: inputs.L = 6 is q's length, below k's; 7 is more than q has.
    s.rows = 7;
    CHECK(error_of([&] { read_qkv_shapes(s); }) ==
          "c.json: inputs.L: 7 is more than the 6 rows (L) of " + q.path + " (a tensor file gives its first L rows)");
    s.rows = 4;
    s.k = kself.path, s.v = vself.path;
    const HeadTensors self = load_qkv(s);
    CHECK((self.k[1].shape(0) == 4 && self.v[1].shape(0) == 4 && self.file_Lk == 6));
    CHECK(read_qkv_shapes(s).Lk == 4);
    // Causal with files of unequal lengths: refused whatever the row limit (it hid the
    // mismatch when it cut k to q's L), as apply refuses it.
    s.k = k.path, s.v = v.path, s.causal = true;
    const std::string causal = k.path + ": causal attention needs q and k of one length, got 10 here and 6 in q (" +
                               q.path + ")";
    CHECK(error_of([&] { read_qkv_shapes(s); }) == causal);
    CHECK(error_of([&] { load_qkv(s); }) == causal);
    s.rows = 0;
    CHECK(error_of([&] { read_qkv_shapes(s); }) == causal);
}

namespace {
// A .safetensors image: `names` F64 tensors of shape (2,) holding i, i + 0.5 (entry i), in order.
std::string safetensors_image(const std::vector<std::string>& names) {
    std::string hdr = "{", data;
    for (std::size_t i = 0; i < names.size(); ++i) {
        hdr += (i ? ",\"" : "\"") + names[i] + R"(":{"dtype":"F64","shape":[2],"data_offsets":[)" +
               std::to_string(16 * i) + "," + std::to_string(16 * i + 16) + "]}";
        const double v[2] = {double(i), double(i) + 0.5};
        data.append(reinterpret_cast<const char*>(v), sizeof v);
    }
    hdr += "}";
    hdr.append((8 - hdr.size() % 8) % 8, ' ');
    std::string len(8, '\0');
    for (int b = 0; b < 8; ++b) len[std::size_t(b)] = char((std::uint64_t(hdr.size()) >> (8 * b)) & 0xff);
    return len + hdr + data;
}
}  // namespace

TEST_CASE("PATH:NAME splits at the first ':' after .npz or .safetensors: a name may hold ':'", "[tensor_file]") {
    // The name is everything after the file's path, ':' and '/' included (it was cut at the
    // last ':' before, so "m.safetensors:blk:0.q" read a .npy file of that name).
    const TensorRef r = parse_tensor_ref("dir/m.safetensors:blk:0.q", "q");
    CHECK((r.path == "dir/m.safetensors" && r.member == "blk:0.q"));
    CHECK(r.name() == "dir/m.safetensors:blk:0.q");
    CHECK(parse_tensor_ref("qkv.npz:a:b:", "q").member == "a:b:");
    CHECK(parse_tensor_ref("qkv.npz:layer/../q", "q").member == "layer/../q");
    CHECK(parse_tensor_ref("c:/d/qkv.npz:x:y", "q").path == "c:/d/qkv.npz");   // ':' before the file's name is the path's
    CHECK(parse_tensor_ref("x.npz:", "q").member.empty());                    // named, but empty: refused when read
    CHECK(parse_tensor_ref("a:b.npy", "q").path == "a:b.npy");
    const std::string path = (fs::temp_directory_path() / ("favor_tf_colon_" + std::to_string(getpid()) + ".safetensors")).string();
    {
        std::ofstream out(path, std::ios::binary);
        out << safetensors_image({"blk:0.q", "blk:0", "q"});
    }
    const NpyArray a = read_tensor(parse_tensor_ref(path + ":blk:0.q", "q"));
    CHECK(a.data == std::vector<double>{0.0, 0.5});
    CHECK(read_tensor(parse_tensor_ref(path + ":blk:0", "q")).data == std::vector<double>{1.0, 1.5});
    CHECK(read_tensor(parse_tensor_ref(path, "q")).data == std::vector<double>{2.0, 2.5});
    // A config's relative reference is resolved in its path only: the name stays as written.
    const Config c = load_config_text(R"({"variants": [{"features": "positive"}], "m": 4,
        "inputs": {"source": "npy", "q": "t/m.safetensors:a//b/../c", "k": "k.npz:x:y", "v": "./v.npy"}})",
                                      "/cfg/c.json", {});
    CHECK(c.inputs.q == "/cfg/t/m.safetensors:a//b/../c");
    CHECK(c.inputs.k == "/cfg/k.npz:x:y");
    CHECK(c.inputs.v == "/cfg/v.npy");
    std::remove(path.c_str());
}

TEST_CASE("a .safetensors header of 120k tensors is read in linear time, a missing name lists 20", "[tensor_file]") {
    // 120k entries took O(N^2) in the JSON callback parser (about 10 minutes, past ctest's
    // timeout; test_json_text.cpp); now a fraction of a second.
    std::vector<std::string> names;
    for (std::size_t i = 0; i < 120000; ++i) names.push_back("model.layers." + std::to_string(i) + ".weight");
    const std::string img = safetensors_image(names);
    CHECK(safetensors_names("m.safetensors", img.data(), img.size()).size() == names.size());
    CHECK(parse_safetensors("m.safetensors", img.data(), img.size(), "model.layers.119999.weight").data ==
          std::vector<double>{119999.0, 119999.5});
    const std::string msg = error_of([&] { parse_safetensors("m.safetensors", img.data(), img.size(), "q"); });
    CAPTURE(msg);
    CHECK(msg.rfind("m.safetensors: no tensor 'q' (the file holds: model.layers.0.weight, model.layers.1.weight, ", 0) == 0);
    CHECK(msg.find(", ... (120000 in all))") != std::string::npos);
    CHECK(msg.size() < 1000);
}
