// Hardening round three (issue 26), the parts testable in-process: metrics whose squared
// norms or scores over- or underflow (class 5), the journal's cell checks (class 2), UTF-8
// and JSON nesting (class 4), output targets that are devices (class 1). The CLI side is
// tests/cli/cli_hardening.sh.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "favor/core/error.hpp"
#include "favor/core/names.hpp"
#include "favor/experiments/config.hpp"
#include "favor/experiments/inputs.hpp"
#include "favor/experiments/journal.hpp"
#include "favor/io/files.hpp"
#include "favor/metrics/metric_table.hpp"
#include "favor/metrics/output_metrics.hpp"

using namespace favor;

namespace {
Mat<double> scaled(const Mat<double>& m, double s) {
    Mat<double> out = m;
    for (double& v : out) v *= s;
    return out;
}
}  // namespace

TEST_CASE("output_rel_error: V x 1e300 and a subnormal V give the ratio of V", "[hardening][metrics]") {
    const QKV in = random_inputs(3, 24, 4, 5, 1.0);
    const Mat<double>& exact = in.v;
    Mat<double> approx = exact;
    for (std::size_t k = 0; k < approx.size(); ++k) approx.data()[k] += 1e-3 * in.q.data()[k % in.q.size()];
    const double r = output_rel_error<double>(exact, approx);
    // Well-scaled outputs: bitwise the plain formula, as before (committed results unchanged).
    double num = 0, den = 0;
    for (std::size_t k = 0; k < exact.size(); ++k) {
        const double e = exact.data()[k] - approx.data()[k];
        num += e * e, den += exact.data()[k] * exact.data()[k];
    }
    REQUIRE(r == std::sqrt(num / den));
    REQUIRE(r > 0);
    // 1e300: the squares overflow (inf / inf = NaN unscaled); the scaling by 2^k is exact here.
    CHECK(output_rel_error<double>(scaled(exact, 1e300), scaled(approx, 1e300)) == Approx(r).epsilon(1e-12));
    // 1e-310: subnormal entries keep ~44 of 53 bits: the difference of two entries 1e-3
    // apart keeps ~34, so the ratio agrees to ~1e-10 (unscaled: 0 / 0 = NaN).
    CHECK(output_rel_error<double>(scaled(exact, 1e-310), scaled(approx, 1e-310)) == Approx(r).epsilon(1e-8));
    CHECK(std::isinf(output_rel_error<double>(exact, scaled(approx, 1e308))));
}

TEST_CASE("attention_kl is NaN, not finite, when float64 scores overflow", "[hardening][metrics]") {
    const QKV in = random_inputs(5, 16, 4, 4, 1.0);
    Features<double> fq{Mat<double>::from_shape({16, 1}), std::vector<double>(16, 0.0)};
    Features<double> fk{Mat<double>::from_shape({16, 1}), std::vector<double>(16, 0.0)};
    fq.phi.fill(1.0), fk.phi.fill(1.0);   // uniform attention, as the baseline
    for (const double s : {1.0, 1e155}) {
        CAPTURE(s);
        const Mat<double> X = scaled(in.q, s), Y = scaled(in.k, s);   // scores ~ s^2: 1e310 overflows
        const PairwiseRequest req = pairwise_request({"attention_kl"}, false, nullptr, 0, X, Y);
        const double kl = pairwise_metrics(X, Y, fq, fk, req).attention_kl;
        if (s == 1.0) CHECK((std::isfinite(kl) && kl > 0));
        else CHECK(std::isnan(kl));
    }
}

TEST_CASE("journal entries are checked as merge checks table cells", "[hardening][journal]") {
    const std::string path = "/tmp/favor_test_journal." + std::to_string(::getpid()) + ".jsonl";
    const Journal j(path, nlohmann::json{{"x", 1}}, false);
    const std::vector<std::string> cols = {"output_mse", "nonfinite", "seconds"};
    REQUIRE_NOTHROW(check_journal_entry(j, {{"0.5", "0", "1.25"}}, 1, cols, 0, 0));
    REQUIRE_NOTHROW(check_journal_entry(j, {{"nan", "3", ""}}, 1, cols, 0, 0));
    REQUIRE_NOTHROW(check_journal_entry(j, {{"-inf", "0", "0"}}, 1, cols, 0, 0));
    REQUIRE_THROWS_WITH(check_journal_entry(j, {{"1,2", "0", "1"}}, 1, cols, 4, 1),
                        Catch::Contains("the entry of cell 4 trial 1: output_mse: '1,2' is not a number"));
    REQUIRE_THROWS_WITH(check_journal_entry(j, {{"abc", "0", "1"}}, 1, cols, 0, 0), Catch::Contains("'abc' is not a number"));
    REQUIRE_THROWS_WITH(check_journal_entry(j, {{"1", "-1", "1"}}, 1, cols, 0, 0), Catch::Contains("nonfinite: '-1' is not a count"));
    REQUIRE_THROWS_WITH(check_journal_entry(j, {{"1", "0", "-1"}}, 1, cols, 0, 0), Catch::Contains("seconds: '-1'"));
    REQUIRE_THROWS_WITH(check_journal_entry(j, {{"1", "0"}}, 1, cols, 0, 0), Catch::Contains("does not have this run's shape"));
    CHECK(journal_kernel_value(j, "0.25", false) == 0.25);
    CHECK(std::isnan(journal_kernel_value(j, "", true)));
    CHECK(std::isinf(journal_kernel_value(j, "inf", false)));
    REQUIRE_THROWS_WITH(journal_kernel_value(j, "-1", false), Catch::Contains("'-1' is negative"));
    REQUIRE_THROWS_WITH(journal_kernel_value(j, "abc", false), Catch::Contains("'abc' is not a number"));
    REQUIRE_THROWS_WITH(journal_kernel_value(j, "", false), Catch::Contains("is empty"));
}

TEST_CASE("utf8_problem finds bytes JSON cannot hold", "[hardening][names]") {
    CHECK(utf8_problem("plain, caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80") == "");
    CHECK(utf8_problem("a\xff" "b") == "byte 0xff at offset 1");
    CHECK(utf8_problem("\xc0\xaf") == "byte 0xc0 at offset 0");           // overlong '/'
    CHECK(utf8_problem("x\xed\xa0\x80") == "byte 0xed at offset 1");      // a surrogate
    CHECK(utf8_problem("\xf4\x90\x80\x80") == "byte 0xf4 at offset 0");   // above U+10FFFF
    CHECK(utf8_problem("\xe2\x82") == "byte 0xe2 at offset 0");           // cut short
    nlohmann::json config = nlohmann::json::object();
    REQUIRE_THROWS_WITH(apply_set(config, "name=a\xfe"),
                        Catch::Contains("not valid UTF-8 (byte 0xfe at offset 6)"));
}

TEST_CASE("JSON nested deeper than kMaxJsonDepth is refused before parsing", "[hardening][config]") {
    const auto nest = [](std::size_t n) { return std::string(n, '[') + std::string(n, ']'); };
    REQUIRE_NOTHROW(parse_json_text(nest(kMaxJsonDepth), "t.json"));
    REQUIRE_THROWS_WITH(parse_json_text(nest(kMaxJsonDepth + 1), "t.json"),
                        Catch::Contains("t.json: nested deeper than 64 levels at byte 64"));
    // 200 KB of brackets: refused without recursion (nlohmann's dump would overflow the stack).
    REQUIRE_THROWS_WITH(parse_json_text("{\"a\": " + nest(100000) + "}", "t.json"), Catch::Contains("nested deeper"));
    // Brackets inside strings and comments do not count.
    REQUIRE_NOTHROW(parse_json_text("{\"a\": \"" + std::string(200, '[') + "\\\"[\"} // " + std::string(200, '{'), "t.json"));
}

TEST_CASE("output files: a device is refused, a link too (never followed)", "[hardening][files]") {
    REQUIRE_THROWS_WITH(output_target("/dev/null"), Catch::Contains("/dev/null: is a character device, not a regular file"));
    REQUIRE_THROWS_WITH(output_target("/tmp"), Catch::Contains("/tmp: is a directory"));
    REQUIRE_THROWS_WITH(check_output_file("/dev/null"), Catch::Contains("character device"));
    REQUIRE_THROWS_WITH(write_file_atomic("/dev/null", "x"), Catch::Contains("character device"));
    const std::string link = "/tmp/favor_test_link." + std::to_string(::getpid());
    REQUIRE(::symlink("/dev/zero", link.c_str()) == 0);
    REQUIRE_THROWS_WITH(output_target(link), Catch::Contains("is a symbolic link (to /dev/zero)"));
    REQUIRE_THROWS_WITH(check_own_file(link), Catch::Contains("is a symbolic link"));
    REQUIRE_THROWS_WITH(open_own_file(link, O_WRONLY), Catch::Contains("is a symbolic link"));
    ::unlink(link.c_str());
    CHECK(output_target("/tmp/favor_no_such_file") == "/tmp/favor_no_such_file");
}
