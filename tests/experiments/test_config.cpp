// Config validation: every bad config is one Error naming the file and the field.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "helpers.hpp"
#include "favor/core/error.hpp"
#include "favor/experiments/config.hpp"

using namespace favor;
using nlohmann::json;

namespace {
const char* kGood = R"({"name": "g", "inputs": {"source": "random", "L": 64, "d": 8},
    "variants": [{"features": "positive", "projection": "orthogonal"}], "m": 16, "trials": 2})";

// The error of parsing kGood with `set` applied; "" when it parses.
std::string error_of(const std::string& set) {
    return favor_test::error_of([&] {
        json j = json::parse(kGood);
        apply_set(j, set);
        parse_config(j, "c.json");
    });
}
}  // namespace

TEST_CASE("a good config parses, with defaults filled in", "[config]") {
    const Config c = parse_config(json::parse(kGood), "c.json");
    REQUIRE(c.variants[0].name == "positive-orthogonal");
    REQUIRE(c.inputs.scale == std::vector<double>{1.0});
    REQUIRE(c.output_dir == "out/g");
    REQUIRE(c.resolved()["m"] == json::array({16}));
}

TEST_CASE("bad configs name the field", "[config]") {
    const auto [set, expect] = GENERATE(table<std::string, std::string>({
        {"trails=3", "c.json: trails: unknown key, did you mean 'trials'?"},
        {"m=0", "c.json: m: must be between 1"},
        {"m=[16,-2]", "c.json: m[1]: must be >= 1"},
        {"m=\"16\"", "c.json: m: must be an integer, got a string"},
        {"m=2.5", "c.json: m: must be an integer"},
        {"trials=0", "c.json: trials: must be between 1"},
        {"variants=[]", "c.json: variants: must not be empty"},
        {"variants.0.features=\"postive\"", "c.json: variants[0].features: unknown feature map 'postive', did you mean 'positive'?"},
        {"variants.0.projection=\"orthogonl\"", "did you mean 'orthogonal'?"},
        {"variants.0.A=0.05", "c.json: variants[0].A: applies only to features 'oprf'"},
        {"variants.0.features=\"exact\"", "c.json: variants[0].features: 'exact' is the reference"},
        {"inputs.scale=0", "c.json: inputs.scale: must be > 0"},
        {"inputs.L=[]", "c.json: inputs.L: must not be an empty list"},
        {"inputs.sorce=\"npy\"", "c.json: inputs.sorce: unknown key, did you mean 'source'?"},
        {"seed=-1", "c.json: seed: must be >= 0"},
        {"seed=1e30", "c.json: seed: does not fit in 64 bits"},
        {"dtype=\"float8\"", "c.json: dtype: must be float32, float64, float16 or bfloat16, got \"float8\""},
        {"variants.0.shift=1", "c.json: variants[0].shift: must be true or false, got an integer"},
        {"variants.0={\"features\":\"relu\",\"shift\":false}", "c.json: variants[0].shift: applies only to features 'trig', 'positive'"},
        {"variants.0={\"features\":\"positive\",\"shift\":false,\"epsilon\":1e-6}",
         "c.json: variants[0].shift: false needs epsilon 0"},
        {"metrics=[\"output_mse\",\"atention_mse\"]", "c.json: metrics[1]: unknown metric \"atention_mse\", did you mean 'attention_mse'?"},
        {"norm=[1]", "c.json: norm: does not apply to \"approximation\" experiments"},
        {"experiment=\"kernal\"", "c.json: experiment: unknown experiment \"kernal\", did you mean 'kernel'?"},
        {"inputs.source=\"npy\"", "c.json: inputs.d: not allowed with source \"npy\""},
        {"inputs.layout=\"BLHD\"", "c.json: inputs.layout: applies only to source \"npy\""},
    }));
    CAPTURE(set);
    const std::string msg = error_of(set);
    REQUIRE(msg.find(expect) != std::string::npos);
    REQUIRE(msg.find('\n') == std::string::npos);
}

TEST_CASE("half dtypes: overflow_fraction always listed, timing refuses them", "[config][half]") {
    json j = json::parse(kGood);
    j["metrics"] = json::array({"output_mse"});
    REQUIRE(parse_config(j, "c.json").approximation.metrics == std::vector<std::string>{"output_mse"});
    j["dtype"] = "bfloat16";
    const Config c = parse_config(j, "c.json");
    REQUIRE(c.approximation.metrics == std::vector<std::string>{"output_mse", "overflow_fraction"});
    REQUIRE(c.resolved()["dtype"] == "bfloat16");
    REQUIRE(dtype_rounding(c.dtype) == Rounding::bf16);
    REQUIRE(dtype_bytes(c.dtype) == 4);
    j.erase("metrics");
    j["experiment"] = "timing";
    j["dtype"] = "float16";
    try {
        parse_config(j, "c.json");
        FAIL("timing with float16 was accepted");
    } catch (const Error& e) {
        REQUIRE(std::string(e.what()).find("c.json: dtype: \"float16\" is emulated") != std::string::npos);
    }
    // "shift": false is recorded in the resolved variant (and only then).
    j = json::parse(kGood);
    j["variants"][0]["shift"] = false;
    REQUIRE(parse_config(j, "c.json").resolved()["variants"][0]["shift"] == false);
    REQUIRE(!parse_config(json::parse(kGood), "c.json").resolved()["variants"][0].contains("shift"));
}

TEST_CASE("set paths and list flags", "[config]") {
    json j = json::parse(kGood);
    apply_set(j, "inputs.scale=[0.5,1]");
    apply_set(j, "variants.0.name=FAVOR+");
    REQUIRE(j["inputs"]["scale"] == json::array({0.5, 1}));
    REQUIRE(j["variants"][0]["name"] == "FAVOR+");
    REQUIRE_THROWS_AS(apply_set(j, "variants.3.name=x"), Error);
    REQUIRE_THROWS_AS(apply_set(j, "noequals"), Error);
    REQUIRE(parse_list_flag("--m", "16,32") == json::array({16, 32}));
    REQUIRE_THROWS_AS(parse_list_flag("--m", "16,x"), Error);
}

// The run flags' typed overrides land where the equivalent --set text would: the same resolved
// config, and a bad value fails on the same field with the same message.
TEST_CASE("typed flag overrides equal their --set text", "[config]") {
    const auto resolved_with = [](const ConfigOverrides& o) {
        json j = json::parse(kGood);
        apply_overrides(j, o);
        return parse_config(j, "c.json").resolved();
    };
    ConfigOverrides typed;
    typed.sets = {"num_features=[32]"};
    typed.m = {{8, 16}};
    typed.L = {{128}};
    typed.trials = 3;
    typed.seed = 18446744073709551615ull;
    typed.dtype = DType::float32;
    ConfigOverrides text;
    text.sets = {"num_features=[32]", "m=[8,16]", "num_features=null", "inputs.L=128",
                 "trials=3", "seed=18446744073709551615", "dtype=\"float32\""};
    REQUIRE(resolved_with(typed) == resolved_with(text));
    REQUIRE(resolved_with(typed)["m"] == json::array({8, 16}));
    REQUIRE_FALSE(resolved_with(typed).contains("num_features"));

    ConfigOverrides features;
    features.num_features = {{64}};
    REQUIRE(resolved_with(features)["num_features"] == json::array({64}));
    REQUIRE_FALSE(resolved_with(features).contains("m"));

    ConfigOverrides huge;
    huge.L = {{kMaxL + 1}};
    std::string message;
    try {
        resolved_with(huge);
    } catch (const Error& e) {
        message = e.what();
    }
    REQUIRE(!message.empty());
    REQUIRE(message == error_of("inputs.L=" + std::to_string(kMaxL + 1)));
}

TEST_CASE("tensor-file inputs: layout, inputs.L as the rows, paths from the config's folder", "[config]") {
    const json npy = json::parse(R"({"inputs": {"source": "npy", "q": "q.npz", "k": "t/k.npy", "v": "/abs/v.npy", "L": [64, 16]},
        "variants": [{"features": "positive"}], "m": 8, "output_dir": "out"})");
    const Config c = parse_config(npy, "c.json");
    CHECK(c.inputs.L == std::vector<std::size_t>{16, 64});
    CHECK(c.resolved()["inputs"]["L"] == json::array({16, 64}));
    CHECK(!c.resolved()["inputs"].contains("layout"));   // recorded only when set
    json j = npy;
    j["inputs"]["layout"] = "BLHD";
    CHECK(parse_config(j, "c.json").resolved()["inputs"]["layout"] == "BLHD");
    for (const auto& [layout, expect] : std::vector<std::pair<std::string, std::string>>{
             {"BLH", "c.json: inputs.layout: needs the axes L and D, got \"BLH\""},
             {"BLLD", "c.json: inputs.layout: axis L twice in \"BLLD\""},
             {"BXLD", "c.json: inputs.layout: letters are B (batch), H (head), L (sequence), D (head dimension)"}}) {
        j["inputs"]["layout"] = layout;
        CHECK(favor_test::error_of([&] { parse_config(j, "c.json"); }).rfind(expect, 0) == 0);
    }
    // load_config: relative paths written in the file from its folder (output_dir too), --set
    // paths as given, the default output_dir from the working directory.
    const std::string dir = "/tmp/favor_cfg_paths_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir + "/sub");
    std::ofstream(dir + "/sub/c.json") << npy.dump();
    const Config f = load_config(dir + "/sub/c.json", {"inputs.k=\"rel/k.npy\""});
    CHECK(f.inputs.q == dir + "/sub/q.npz");
    CHECK(f.inputs.k == "rel/k.npy");
    CHECK(f.inputs.v == "/abs/v.npy");
    CHECK(f.output_dir == dir + "/sub/out");
    CHECK(load_config(dir + "/sub/c.json", {"output_dir=\"o2\""}).output_dir == "o2");
    CHECK(load_config(dir + "/sub/c.json", {"output_dir=null"}).output_dir == "out/c");
    std::filesystem::remove_all(dir);
}

TEST_CASE("query_rows: a number of rows, never with a gradient metric", "[config]") {
    REQUIRE(error_of("query_rows=0").find("c.json: query_rows: must be between 1") == 0);
    REQUIRE(error_of("query_rows=8").empty());
    REQUIRE(error_of("metrics=[\"grad_cosine\"]").empty());
    // Both together: dK and dV sum over every query row, a row sample cannot give them.
    json j = json::parse(kGood);
    apply_set(j, "metrics=[\"grad_cosine\"]");
    apply_set(j, "query_rows=8");
    const std::string msg = favor_test::error_of([&] { parse_config(j, "c.json"); });
    REQUIRE(msg.rfind("c.json: query_rows: the gradient metrics need every query row", 0) == 0);
}
