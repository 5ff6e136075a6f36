// favor compare, issue 36: a metric's direction (grad_cosine is higher-is-better), scale-free
// statistics, the checks on errors.csv's key columns, the default metric, one pair of files
// per metric, written only as regular files (never through a link).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "favor/core/error.hpp"
#include "favor/experiments/config.hpp"
#include "favor/io/report.hpp"
#include "favor/results/compare.hpp"

#include "temp_dir.hpp"

namespace {

using favor_test::TempDir;

namespace fs = std::filesystem;

std::string cell(const favor::Table& t, std::size_t row, const std::string& col) { return t.rows[row][t.column(col)]; }

std::string message_of(const favor::CompareInput& in, const favor::CompareOptions& opt = {}) {
    try {
        favor::compare_tables(in, opt);
    } catch (const favor::Error& e) {
        return e.what();
    }
    return "no error";
}

favor::CompareInput input_of(const std::string& errors, const std::string& summary = "") {
    favor::CompareInput in;
    in.errors_name = "in/errors.csv";
    in.errors = errors;
    in.summary_name = "in/summary.csv";
    if (!summary.empty()) in.summary = summary;
    return in;
}

const char* kHeader = "variant,features,projection,L,d,m,num_features,scale,trial,seed,output_mse,grad_cosine,nonfinite\n";

// Two variants, 8 trials each, other projections (unpaired): "hi" has the higher values.
std::string two_variants(double scale_by) {
    std::string csv = kHeader;
    const double lo[] = {0.11, 0.15, 0.12, 0.18, 0.13, 0.16, 0.14, 0.17};
    const double hi[] = {0.81, 0.85, 0.92, 0.88, 0.83, 0.9, 0.86, 0.87};
    for (int t = 0; t < 8; ++t)
        for (const char* v : {"lo", "hi"}) {
            const double x = (v[0] == 'l' ? lo[t] : hi[t]) * scale_by;
            csv += std::string(v) + ",positive," + (v[0] == 'l' ? "iid" : "orthogonal") + ",64,8,16,16,1," +
                   std::to_string(t) + ",0," + favor::format_number(x) + "," + favor::format_number(x) + ",0\n";
        }
    return csv;
}

}  // namespace

TEST_CASE("compare: grad_cosine ranks and judges higher as better, errors lower", "[compare]") {
    const std::string sum = "variant,features,projection,L,d,m,num_features,scale,trials,baseline_output_mse,"
                            "baseline_grad_cosine\nlo,positive,iid,64,8,16,16,1,8,0.5,0.5\n"
                            "hi,positive,orthogonal,64,8,16,16,1,8,0.5,0.5\n";
    favor::CompareOptions opt;
    opt.metrics = {"output_mse", "grad_cosine"};
    const favor::CompareResult r = favor::compare_tables(input_of(two_variants(1), sum), opt);
    // Rows per metric: lo vs hi, lo vs uniform, hi vs uniform.
    REQUIRE(r.comparisons.rows.size() == 6);
    for (std::size_t i = 0; i < 6; ++i) {
        CAPTURE(i);
        CHECK(cell(r.comparisons, i, "a") == (i % 3 == 2 ? "hi" : "lo"));
    }
    // output_mse: lo's error is lower, so lo is better; grad_cosine: hi's cosine is higher.
    CHECK(cell(r.comparisons, 0, "verdict") == "a better");
    CHECK(cell(r.comparisons, 1, "verdict") == "a better");   // lo 0.14 < uniform 0.5
    CHECK(cell(r.comparisons, 2, "verdict") == "a worse");    // hi 0.87 > uniform 0.5
    CHECK(cell(r.comparisons, 3, "metric") == "grad_cosine");
    CHECK(cell(r.comparisons, 3, "verdict") == "a worse");
    CHECK(cell(r.comparisons, 4, "verdict") == "a worse");
    CHECK(cell(r.comparisons, 5, "verdict") == "a better");
    // Rankings: best first in the metric's direction; vs_uniform in words.
    const favor::Table& k = r.ranking;
    REQUIRE(k.rows.size() == 6);
    CHECK(cell(k, 0, "variant") == "lo");
    CHECK(cell(k, 0, "vs_uniform") == "better");
    CHECK(cell(k, 2, "variant") == "hi");
    CHECK(cell(k, 2, "vs_uniform") == "worse");
    CHECK(cell(k, 3, "metric") == "grad_cosine");
    CHECK(cell(k, 3, "variant") == "hi");
    CHECK(cell(k, 3, "rank") == "1");
    CHECK(cell(k, 3, "vs_uniform") == "better");
    CHECK(cell(k, 4, "variant") == "uniform");
    CHECK(cell(k, 5, "variant") == "lo");
    CHECK(cell(k, 5, "tied_with_best") == "no");
    REQUIRE(r.summary.size() == 2);
    CHECK_THAT(r.summary[0], Catch::Contains("output_mse: best: lo ") && Catch::EndsWith("beat uniform: 1 of 2"));
    CHECK_THAT(r.summary[1], Catch::Contains("grad_cosine: best: hi ") && Catch::EndsWith("beat uniform: 1 of 2"));
}

TEST_CASE("compare: the statistics are scale-free, also near the ends of the double range", "[compare]") {
    const std::vector<double> d = {0.31, -0.12, 1.7, 0.43, -0.25, 0.9, 0.05, 0.6};
    const std::vector<double> a = {1.2, 0.8, 1.9, 1.4, 1.1}, b = {0.5, 0.9, 0.3, 0.7, 0.4};
    auto times = [](std::vector<double> x, double c) {
        for (double& v : x) v *= c;
        return x;
    };
    const double t = favor::paired_t(d), w = favor::welch_t(a, b);
    const double p = favor::paired_signflip_p(d), q = favor::welch_permutation_p(a, b);
    REQUIRE(p < 0.1);
    REQUIRE(q < 0.05);
    const auto ci = favor::ratio_ci(a, b, false, 7);
    for (double c : {std::ldexp(1.0, 1000), std::ldexp(1.0, -1000), 1e300, 1e-300, 8e307}) {
        CAPTURE(c);
        CHECK(favor::paired_t(times(d, c)) == Approx(t).epsilon(1e-12));
        CHECK(favor::welch_t(times(a, c), times(b, c)) == Approx(w).epsilon(1e-12));
        CHECK(favor::paired_signflip_p(times(d, c)) == p);
        CHECK(favor::welch_permutation_p(times(a, c), times(b, c)) == q);
        CHECK(favor::mean_of(times(a, c)) / c == Approx(favor::mean_of(a)).epsilon(1e-12));
        const auto cc = favor::ratio_ci(times(a, c), times(b, c), false, 7);
        CHECK(cc.first == Approx(ci.first).epsilon(1e-12));
        CHECK(cc.second == Approx(ci.second).epsilon(1e-12));
    }
    // Whole tables: errors of 1e300 and 1e-300 give the verdicts and p of errors of 1.
    favor::CompareOptions opt;
    const favor::Table ref = favor::compare_tables(input_of(two_variants(1)), opt).comparisons;
    REQUIRE(cell(ref, 0, "verdict") == "a better");
    for (double c : {1e300, 1e-300, 1e307}) {
        CAPTURE(c);
        const favor::Table u = favor::compare_tables(input_of(two_variants(c)), opt).comparisons;
        for (const char* col : {"p_value", "p_min", "p_holm", "verdict"}) CHECK(cell(u, 0, col) == cell(ref, 0, col));
        CHECK(std::stod(cell(u, 0, "ratio")) == Approx(std::stod(cell(ref, 0, "ratio"))).epsilon(1e-9));
        CHECK(std::stod(cell(u, 0, "mean_a")) / c == Approx(std::stod(cell(ref, 0, "mean_a"))).epsilon(1e-9));
    }
}

TEST_CASE("compare: garbage key cells, one name for two estimators and a variant named uniform are refused",
          "[compare]") {
    const std::string good = two_variants(1);
    REQUIRE(message_of(input_of(good)) == "no error");
    // Edits of line 3 (lo's second row... the second data row is hi's first: line 3).
    auto edited = [&](const std::string& from, const std::string& to) {
        std::string s = good;
        const std::size_t line3 = s.find('\n', s.find('\n') + 1) + 1;
        const std::size_t at = s.find(from, line3);
        REQUIRE(at != std::string::npos);
        return s.replace(at, from.size(), to);
    };
    CHECK(message_of(input_of(edited("hi,positive,orthogonal,64,", "hi,positive,orthogonal,6x4,"))) ==
          "in/errors.csv: line 3, column L: '6x4' is not a count (digits, no leading zero)");
    CHECK_THAT(message_of(input_of(edited(",1,0,0,", ",1,-1,0,"))), Catch::Contains("line 3, column trial: '-1' is not a count"));
    CHECK_THAT(message_of(input_of(edited(",16,1,0,", ",16,1.0,0,"))),
               Catch::Contains("line 3, column scale: '1.0' is not a scale as favor writes it"));
    CHECK_THAT(message_of(input_of(edited(",16,1,0,", ",16,-1,0,"))), Catch::Contains("column scale: '-1'"));
    CHECK_THAT(message_of(input_of(edited("hi,positive,orthogonal", "hi,positive,orthogonl"))),
               Catch::Contains("line 3, column projection: 'orthogonl' is not a projection"));
    CHECK_THAT(message_of(input_of(edited("hi,positive,orthogonal", "uniform,positive,orthogonal"))),
               Catch::Contains("line 3, column variant: 'uniform' is not a variant name: must not be 'uniform'"));
    // lo's rows at two projections (line 2 iid, line 4 orthogonal): refused, not pooled.
    std::string two = good;
    const std::size_t line4 = two.find("lo,positive,iid", two.find("lo,positive,iid") + 1);
    two.replace(line4, 15, "lo,positive,orthogonal");
    CHECK(message_of(input_of(two)) == "in/errors.csv: line 4, column projection: 'orthogonal' differs from line 2's "
                                       "'iid' for variant lo: two estimators under one name (rename one)");
    // lo's rows with two seeds in one cell.
    std::string seeds = good;
    const std::size_t at = seeds.find(",0,0.15,");
    seeds.replace(at, 8, ",5,0.15,");
    CHECK_THAT(message_of(input_of(seeds)), Catch::Contains("line 4: variant lo has seed 5 here but 0 on line 2"));
}

TEST_CASE("compare: a variant named uniform is refused by the config too", "[compare]") {
    const nlohmann::json j = nlohmann::json::parse(
        R"({"inputs": {"source": "random", "L": 16, "d": 4}, "m": 4, "trials": 2,
            "variants": [{"name": "uniform", "features": "positive", "projection": "iid"}]})");
    try {
        favor::parse_config(j, "c.json");
        FAIL("accepted");
    } catch (const favor::Error& e) {
        CHECK_THAT(std::string(e.what()), Catch::StartsWith("c.json: variants[0].name: must not be 'uniform'"));
    }
}

TEST_CASE("compare: the default metric is the first compared one errors.csv has", "[compare]") {
    // No output_mse column: the default was output_mse, an error; now attention_tv (the table's
    // order: attention_tv before grad_cosine).
    std::string csv = "variant,features,projection,L,d,m,num_features,scale,trial,seed,grad_cosine,attention_tv,nonfinite\n";
    for (int t = 0; t < 4; ++t)
        for (const char* v : {"x", "y"})
            csv += std::string(v) + ",positive,iid,64,8,16,16,1," + std::to_string(t) + ",0,0." + std::to_string(t + 1) +
                   (v[0] == 'x' ? "1" : "2") + ",0.3,0\n";
    const favor::CompareResult r = favor::compare_tables(input_of(csv), {});
    CHECK(r.metrics == std::vector<std::string>{"attention_tv"});
    REQUIRE(r.comparisons.rows.size() == 1);
    CHECK(cell(r.comparisons, 0, "metric") == "attention_tv");
    std::string none = "variant,features,projection,L,d,m,num_features,scale,trial,seed,nonfinite,seconds\n"
                       "x,positive,iid,64,8,16,16,1,0,0,0,0.1\n";
    CHECK(message_of(input_of(none)) == "in/errors.csv: no metric columns to compare");
}

TEST_CASE("compare: one pair of files per metric, written only as regular files", "[compare]") {
    TempDir dir("files");
    dir.write("errors.csv", two_variants(1));
    favor::CompareOptions opt;
    opt.metrics = {"grad_cosine"};
    favor::write_comparisons(dir.path.string(), favor::compare_results(dir.path.string(), opt));
    opt.metrics = {"output_mse"};
    const favor::CompareResult r = favor::compare_results(dir.path.string(), opt);
    favor::write_comparisons(dir.path.string(), r);
    // The grad_cosine files are still there beside output_mse's.
    CHECK(favor::compare_file_names("output_mse") ==
          std::make_pair(std::string("comparisons_output_mse.csv"), std::string("ranking_output_mse.csv")));
    CHECK(dir.read("comparisons_grad_cosine.csv").find(",grad_cosine,") != std::string::npos);
    CHECK(dir.read("comparisons_output_mse.csv") == favor::to_csv(r.comparisons));
    CHECK(dir.read("ranking_output_mse.csv") == favor::to_csv(r.ranking));
    CHECK_FALSE(fs::exists(dir.path / "comparisons.csv"));
    // A link planted at an output is refused before anything is written; its target is untouched.
    dir.write("target.txt", "keep\n");
    fs::remove(dir.path / "ranking_output_mse.csv");
    fs::create_symlink(dir.path / "target.txt", dir.path / "ranking_output_mse.csv");
    dir.write("comparisons_output_mse.csv", "old\n");
    try {
        favor::write_comparisons(dir.path.string(), r);
        FAIL("wrote through a link");
    } catch (const favor::Error& e) {
        CHECK_THAT(std::string(e.what()), Catch::EndsWith("ranking_output_mse.csv: is a symbolic link; favor writes its "
                                                          "own files only as regular files, in place (remove it)"));
    }
    CHECK(dir.read("target.txt") == "keep\n");
    CHECK(dir.read("comparisons_output_mse.csv") == "old\n");   // nothing written: all checked first
    CHECK(fs::is_symlink(dir.path / "ranking_output_mse.csv"));
    // A FIFO or a directory there: refused, not replaced.
    fs::remove(dir.path / "ranking_output_mse.csv");
    REQUIRE(::mkfifo((dir.path / "ranking_output_mse.csv").c_str(), 0644) == 0);
    CHECK_THROWS_WITH(favor::write_comparisons(dir.path.string(), r), Catch::Contains("is a FIFO"));
    fs::remove(dir.path / "ranking_output_mse.csv");
    fs::create_directory(dir.path / "ranking_output_mse.csv");
    CHECK_THROWS_WITH(favor::write_comparisons(dir.path.string(), r), Catch::Contains("is a directory"));
    CHECK(fs::is_directory(dir.path / "ranking_output_mse.csv"));
    for (const auto& e : fs::directory_iterator(dir.path))
        CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

// A swap-in's result set (favor.swap_in): the model metrics, a `layers` column that splits the
// cells (one variant name on two layer sets is two cells, not one pooled estimator), its
// baselines read per layer set, and a layers cell favor does not write refused.
TEST_CASE("compare: a swap-in layers column is a cell key, and bad layer sets are refused", "[compare]") {
    std::string csv = "variant,features,projection,L,d,m,num_features,scale,layers,trial,seed,bits_per_byte,"
                      "delta_bits_per_byte\n";
    const double d0[] = {0.11, 0.15, 0.12, 0.18, 0.13, 0.16, 0.14, 0.17};
    for (const char* layers : {"0", "all"})
        for (int t = 0; t < 8; ++t) {
            const double delta = layers[0] == '0' ? d0[t] : 1 + d0[t];   // all layers: more damage
            csv += std::string("p,positive,orthogonal,1024,64,64,64,,") + layers + "," + std::to_string(t) + ",0," +
                   favor::format_number(2.0 + delta) + "," + favor::format_number(delta) + "\n";
        }
    const std::string sum = "variant,features,projection,L,d,m,num_features,scale,layers,trials,baseline_bits_per_byte,"
                            "baseline_delta_bits_per_byte\np,positive,orthogonal,1024,64,64,64,,0,8,2.3,0.3\n"
                            "p,positive,orthogonal,1024,64,64,64,,all,8,2.5,0.5\n";
    favor::CompareOptions opt;
    opt.metrics = {"delta_bits_per_byte"};
    const favor::CompareResult r = favor::compare_tables(input_of(csv, sum), opt);
    REQUIRE(r.comparisons.rows.size() == 2);   // p against uniform, once per layer set
    CHECK(cell(r.comparisons, 0, "layers") == "0");
    CHECK(cell(r.comparisons, 0, "verdict") == "a better");   // 0.145 < 0.3
    CHECK(cell(r.comparisons, 0, "mean_b") == "0.3");
    CHECK(cell(r.comparisons, 1, "layers") == "all");
    CHECK(cell(r.comparisons, 1, "verdict") == "a worse");    // 1.145 > 0.5
    for (const char* bad : {"01", "2+1", "0+0", "0 1", "", "al", "+1"}) {
        CAPTURE(bad);
        std::string s = csv;
        const std::size_t at = s.find(",,all,");
        s.replace(at, 6, std::string(",,") + bad + ",");
        CHECK_THAT(message_of(input_of(s, sum)), Catch::Contains("column layers: '" + std::string(bad) +
                                                                 "' is not a layer set as favor.swap_in writes it"));
    }
}
