// Issue 36, the command line's paths in-process: outputs compared with inputs as files
// (output_paths.hpp), links never followed by an output (files.hpp), NUL refused in every
// config string and path, the gradients' names, the readers' entry positions and the
// inverse layout permutation (apply --layout's outputs).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "favor/experiments/config.hpp"
#include "favor/io/files.hpp"
#include "favor/io/output_paths.hpp"
#include "favor/io/tensor_io.hpp"
#include "favor/io/tensor_layout.hpp"
#include "favor/runs/apply_files.hpp"
#include "helpers.hpp"

namespace fs = std::filesystem;
using namespace favor;
using favor_test::error_of;

namespace {
// A fresh directory (mkdtemp), removed with what it holds at the end of the scope.
struct Scratch {
    std::string dir;
    Scratch() {
        std::string t = (fs::temp_directory_path() / "favor_paths_XXXXXX").string();
        dir = ::mkdtemp(t.data()) ? t : "";
        REQUIRE(!dir.empty());
    }
    ~Scratch() { fs::remove_all(dir); }
    std::string file(const std::string& name, const std::string& text = "x") const {
        std::ofstream(dir + "/" + name) << text;
        return dir + "/" + name;
    }
};
}  // namespace

TEST_CASE("same_file: hard links, symbolic links and spellings of one file", "[output_paths]") {
    const Scratch s;
    const std::string a = s.file("a.npy"), b = s.file("b.npy");
    REQUIRE(::link(a.c_str(), (s.dir + "/hard.npy").c_str()) == 0);
    REQUIRE(::symlink(a.c_str(), (s.dir + "/soft.npy").c_str()) == 0);
    CHECK(same_file(a, s.dir + "/hard.npy"));
    CHECK(same_file(a, s.dir + "/soft.npy"));
    CHECK(same_file(a, s.dir + "/./sub/../a.npy"));
    CHECK_FALSE(same_file(a, b));
    CHECK(same_file(s.dir + "/new.npy", s.dir + "/x/../new.npy"));   // neither exists: the canonical paths
    CHECK_FALSE(same_file(s.dir + "/new.npy", s.dir + "/new2.npy"));
    const std::string msg = error_of([&] {
        check_distinct_files({{a, "--q"}, {b, "--grad"}}, {{s.dir + "/o.npy", "--out"}, {s.dir + "/hard.npy", "the dq output"}},
                             "apply");
    });
    CHECK(msg == "apply: the dq output " + s.dir + "/hard.npy is the same file as --q " + a +
                     "; every output must differ from every input and from the other outputs");
    CHECK(error_of([&] { check_distinct_files({}, {{a, "--out"}, {s.dir + "/soft.npy", "the dq output"}}, "apply"); })
              .find("the dq output " + s.dir + "/soft.npy is the same file as --out " + a) != std::string::npos);
    CHECK_NOTHROW(check_distinct_files({{a, "--q"}}, {{b, "--out"}, {s.dir + "/c.npy", "the dq output"}}, "apply"));
}

TEST_CASE("output files are never written through a link, dangling or not", "[output_paths][files]") {
    const Scratch s;
    const std::string target = s.file("t.npy", "old");
    REQUIRE(::symlink(target.c_str(), (s.dir + "/to_file.npy").c_str()) == 0);
    REQUIRE(::symlink((s.dir + "/missing/x.npy").c_str(), (s.dir + "/dangling.npy").c_str()) == 0);
    CHECK(error_of([&] { check_output_file(s.dir + "/dangling.npy"); }) ==
          s.dir + "/dangling.npy: is a symbolic link (to " + s.dir +
              "/missing/x.npy); favor writes its outputs in place, never through a link (give the target, or remove "
              "the link)");
    CHECK_THROWS_WITH(write_file_atomic(s.dir + "/to_file.npy", "new"), Catch::Contains("is a symbolic link"));
    std::ifstream in(target);
    std::string text;
    in >> text;
    CHECK(text == "old");
    CHECK_FALSE(fs::exists(s.dir + "/missing"));
    CHECK(output_target(s.dir + "/fresh.npy") == s.dir + "/fresh.npy");
}

TEST_CASE("NUL in a config string or a path is refused, naming the field", "[output_paths][config]") {
    const std::string base = R"("inputs": {"source": "random", "L": 8, "d": 4}, "variants": [{"features": "positive"}], "m": 4)";
    CHECK(error_of([&] { load_config_text("{\"name\": \"a\\u0000b\", " + base + "}", "c.json", {}); }) ==
          "c.json: name: holds a NUL character (\\u0000) at offset 1; no name or path can contain one");
    CHECK(error_of([&] { load_config_text("{\"output_dir\": \"x\\u0000\", " + base + "}", "/d/c.json", {}); })
              .rfind("/d/c.json: output_dir: holds a NUL character", 0) == 0);
    ConfigOverrides o;
    o.sets = {"variants.0.projection=\"iid\\u0000\""};
    CHECK(error_of([&] { load_config_text("{" + base + "}", "c.json", o); }).find("variants[0].projection: holds a NUL") !=
          std::string::npos);
    const std::string cut("a\0b", 3);
    CHECK(error_of([&] { check_output_file(cut); }) == "a\\x00b: holds a NUL character (\\u0000) at offset 1; no name or path can contain one");
    CHECK(error_of([&] { read_regular_file(cut, "config file", 100); }).find("holds a NUL character") != std::string::npos);
    CHECK(error_of([&] { check_output_dir(cut); }).find("holds a NUL character") != std::string::npos);
}

TEST_CASE("apply's gradients are named after --out", "[output_paths][apply]") {
    CHECK(gradient_paths("r/o.npy") == std::vector<std::string>{"r/o_dq.npy", "r/o_dk.npy", "r/o_dv.npy"});
    CHECK(gradient_paths("o") == std::vector<std::string>{"o_dq.npy", "o_dk.npy", "o_dv.npy"});
    CHECK(gradient_paths(".npy") == std::vector<std::string>{".npy_dq.npy", ".npy_dk.npy", ".npy_dv.npy"});
}

TEST_CASE("entry positions in favor's order, and outputs back in the layout", "[output_paths][tensor_io]") {
    CHECK(entry_position({2, 3, 5, 4}, ((1 * 3 + 2) * 5 + 4) * 4 + 3) == "entry (b, h, l, d) = (1, 2, 4, 3)");
    CHECK(entry_position({3, 5, 4}, (2 * 5 + 1) * 4 + 0) == "entry (h, l, d) = (2, 1, 0)");
    CHECK(entry_position({5, 4}, 7) == "entry (l, d) = (1, 3)");
    // BLHD: a (B, H, L, d) tensor written back as (B, L, H, d), the inverse of to_canonical.
    NpyArray file;
    file.shape = {2, 5, 3, 4};   // (B, L, H, d)
    for (std::size_t i = 0; i < 120; ++i) file.data.push_back(double(i));
    NpyArray a = file;
    to_canonical(a, "BLHD", "f");
    CHECK(a.shape == std::vector<std::size_t>{2, 3, 5, 4});
    CHECK(a.data[((1 * 3 + 2) * 5 + 4) * 4 + 3] == file.data[((1 * 5 + 4) * 3 + 2) * 4 + 3]);
    from_canonical(a, "BLHD");
    CHECK(a.shape == file.shape);
    CHECK(a.data == file.data);
    CHECK(layout_shape({2, 3, 5, 4}, "LDHB") == std::vector<std::size_t>{5, 4, 3, 2});
    NpyArray b = file;   // every layout of rank 4 round-trips
    for (const char* layout : {"BHLD", "LHBD", "DLHB", "HBDL"}) {
        NpyArray c = b;
        to_canonical(c, layout, "f");
        from_canonical(c, layout);
        CHECK(c.data == b.data);
        CHECK(c.shape == b.shape);
    }
}
