// Result integrity: the output directory as one result set (swap, lock, leftovers), the
// journal and resume, strict merge, and names that stay one CSV cell.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "favor/experiments/config.hpp"
#include "helpers.hpp"
#include "temp_dir.hpp"
#include "favor/core/error.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/experiments/journal.hpp"
#include "favor/experiments/result_dir.hpp"
#include "favor/io/json_diff.hpp"
#include "favor/results/merge.hpp"

using namespace favor;
using favor_test::as_input;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using favor_test::TempDir;

std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<std::string> entries(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

json small_config() {
    return json::parse(R"J({
        "name": "t", "seed": 3,
        "inputs": {"source": "random", "L": [32, 48], "d": 4, "scale": [0.5, 1.0]},
        "variants": [{"features": "positive", "projection": "orthogonal"},
                     {"features": "trig", "projection": "iid", "name": "trig v2 (a=1)"}],
        "m": [4, 8], "trials": 2, "metrics": ["output_mse", "attention_kl"]})J");
}

RunResult run_shard(const json& j, Shard s) {
    RunOptions opt;
    opt.threads = 1;
    opt.shard = s;
    return run_experiment(parse_config(j, "t.json"), opt);
}

}  // namespace

TEST_CASE("a result set is replaced whole, with no temporaries left", "[integrity]") {
    TempDir t;
    const std::string out = t / "out";
    {
        OutputDir d(out);
        d.replace({{"errors.csv", "a\n1\n"}, {"run.json", "{}\n"}});
    }
    REQUIRE(entries(t.path) == std::vector<std::string>{"out"});
    REQUIRE(entries(out) == (std::vector<std::string>{"errors.csv", "run.json"}));
    // A kernel-like set replaces it: errors.csv does not linger.
    {
        OutputDir d(out);
        d.replace({{"summary.csv", "b\n2\n"}, {"run.json", "{\"k\":1}\n"}});
    }
    REQUIRE(entries(out) == (std::vector<std::string>{"run.json", "summary.csv"}));
    // The same through the two-rename path (file systems without RENAME_EXCHANGE).
    ::setenv("FAVOR_TEST_NO_EXCHANGE", "1", 1);
    {
        OutputDir d(out);
        d.replace({{"timing.csv", "c\n3\n"}, {"run.json", "{}\n"}});
    }
    ::unsetenv("FAVOR_TEST_NO_EXCHANGE");
    REQUIRE(entries(out) == (std::vector<std::string>{"run.json", "timing.csv"}));
    REQUIRE(entries(t.path) == std::vector<std::string>{"out"});
}

TEST_CASE("a failed write leaves the previous set and nothing else", "[integrity]") {
    TempDir t;
    const std::string out = t / "out";
    {
        OutputDir d(out);
        d.replace({{"errors.csv", "old\n"}, {"run.json", "{\"old\":1}\n"}});
    }
    ::setenv("FAVOR_TEST_FAIL_WRITE", "2", 1);
    {
        OutputDir d(out);
        REQUIRE_THROWS_WITH(d.replace({{"errors.csv", "new\n"}, {"run.json", "{}\n"}}),
                            Catch::Contains("cannot write the new result set (run.json: No space left on device"));
    }
    ::unsetenv("FAVOR_TEST_FAIL_WRITE");
    REQUIRE(slurp(out + "/errors.csv") == "old\n");
    REQUIRE(entries(t.path) == std::vector<std::string>{"out"});
    // Nothing committed and nothing created: a fresh directory is not left behind either.
    { OutputDir d(t / "a/b/c"); }
    REQUIRE(!fs::exists(t / "a"));
}

TEST_CASE("the lock refuses a second writer and is free again afterwards", "[integrity]") {
    TempDir t;
    const std::string out = t / "out";
    {
        OutputDir first(out);
        REQUIRE_THROWS_WITH(OutputDir(out), Catch::Contains("another favor process (pid " + std::to_string(::getpid())));
        REQUIRE_THROWS_WITH(OutputLock(out), Catch::Contains("another favor process"));
    }
    REQUIRE_NOTHROW(OutputDir(out));
    REQUIRE(entries(t.path).empty());   // lock file removed, no directory created
}

TEST_CASE("leftovers of killed runs are recognised, removed, and the old set restored", "[integrity]") {
    TempDir t;
    const std::string out = t / "out";
    REQUIRE(is_favor_temporary_name(".out.favor-tmp-123-0123456789abcdef"));
    REQUIRE(is_favor_temporary_name(".a.b.favor-old-9-fedcba9876543210"));
    REQUIRE(is_favor_temporary_name(".out.favor-lock"));
    REQUIRE(!is_favor_temporary_name("out.favor-tmp-123-0123456789abcdef"));
    REQUIRE(!is_favor_temporary_name(".out.favor-tmp-12x-0123456789abcdef"));
    REQUIRE(!is_favor_temporary_name(".out.favor-tmp-123-0123456789ABCDEF"));
    REQUIRE(!is_favor_temporary_name("results"));
    // Killed between the two renames: OUT is missing, the old set is beside it.
    fs::create_directories(t / ".out.favor-old-77-00000000000000aa");
    std::ofstream(t / ".out.favor-old-77-00000000000000aa/run.json") << "{\"old\":1}\n";
    fs::create_directories(t / ".out.favor-tmp-77-00000000000000bb");
    std::ofstream(t / ".out.favor-tmp-77-00000000000000bb/run.json") << "{\"new\":1}\n";
    fs::create_directories(t / ".other.favor-tmp-77-00000000000000bb");   // another OUT's: kept
    { OutputDir d(out); }
    REQUIRE(slurp(out + "/run.json") == "{\"old\":1}\n");
    REQUIRE(entries(t.path) == (std::vector<std::string>{".other.favor-tmp-77-00000000000000bb", "out"}));
}

TEST_CASE("an output directory that is not a result set is refused", "[integrity]") {
    TempDir t;
    fs::create_directories(t / "mine");
    std::ofstream(t / "mine/notes.txt") << "x";
    REQUIRE_THROWS_WITH(OutputDir(t / "mine"), Catch::Contains("not a favor result directory"));
    fs::create_directories(t / "res/shards/0");
    std::ofstream(t / "res/run.json") << "{}";
    REQUIRE_THROWS_WITH(OutputDir(t / "res"), Catch::Contains("contains the directory shards"));
    std::ofstream(t / "file") << "x";
    REQUIRE_THROWS_WITH(OutputDir(t / "file"), Catch::Contains("not a directory"));
    REQUIRE(fs::exists(t / "mine/notes.txt"));
}

TEST_CASE("journal: entries round-trip, a torn last line is dropped, another run is refused", "[integrity]") {
    TempDir t;
    const std::string path = t / "journal.jsonl";
    const json id{{"config", {{"trials", 3}}}, {"shard", {{"index", 0}, {"count", 1}}}};
    {
        Journal j(path, id, false);
        j.record(4, 1, {{"0.5", ""}});
        j.record(0, 0, {{"1e-300", "inf"}, {"nan", "2"}});
    }
    std::ofstream(path, std::ios::app) << "{\"cell\":7,\"tri";   // killed mid-write
    {
        Journal j(path, id, true);
        REQUIRE(j.loaded() == 2);
        REQUIRE(*j.find(0, 0) == JournalRows{{"1e-300", "inf"}, {"nan", "2"}});
        REQUIRE(j.find(7, 0) == nullptr);
        j.record(7, 0, {{"3", "4"}});
    }
    const std::string text = slurp(path);
    REQUIRE(text.find("\"tri{") == std::string::npos);   // the torn line was cut off
    REQUIRE(Journal(path, id, true).loaded() == 3);
    json other = id;
    other["config"]["trials"] = 5;
    REQUIRE_THROWS_WITH(Journal(path, other, true), Catch::Contains("different run (config.trials: 3 vs 5)"));
    // Without --resume an existing journal is replaced at the first record.
    {
        Journal j(path, other, false);
        REQUIRE(j.existed());
        j.record(1, 1, {{"x"}});
    }
    REQUIRE(Journal(path, other, true).loaded() == 1);
    std::ofstream(path, std::ios::app) << "garbage\n{\"cell\":1,\"trial\":2,\"rows\":[[\"1\"]]}\n";
    REQUIRE_THROWS_WITH(Journal(path, other, true), Catch::Contains("line 3: not JSON"));
}

TEST_CASE("resume from a journal gives byte-identical tables", "[integrity]") {
    TempDir t;
    // Also with input seeds: the journal keys each item by (cell, input seed, trial).
    json config = small_config();
    if (GENERATE(false, true)) config["input_seeds"] = json::array({0, 4});
    const Config cfg = parse_config(config, "t.json");
    RunOptions plain;
    plain.threads = 2;
    const RunResult full = run_experiment(cfg, plain);
    const std::string path = t / "journal.jsonl";
    // A run stopped after some items: the stop flag is set from the progress callback.
    std::atomic<bool> stop{false};
    {
        Journal j(path, run_identity(cfg, {}), false);
        RunOptions opt;
        opt.threads = 2;
        opt.journal = &j;
        opt.stop = &stop;
        opt.progress = [&](std::size_t done, std::size_t) {
            if (done >= 5) stop = true;
        };
        const RunResult r = run_experiment(cfg, opt);
        REQUIRE(!r.complete);
        REQUIRE(r.items_done >= 5);
        REQUIRE(r.items_done < r.items_total);
    }
    Journal j(path, run_identity(cfg, {}), true);
    REQUIRE(j.loaded() >= 5);
    RunOptions opt;
    opt.threads = 1;
    opt.journal = &j;
    const RunResult r = run_experiment(cfg, opt);
    REQUIRE(r.complete);
    REQUIRE(r.items_resumed == j.loaded());
    REQUIRE(to_csv(r.errors) == to_csv(full.errors));
    REQUIRE(to_csv(r.summary) == to_csv(full.summary));
    REQUIRE(to_csv(r.baselines) == to_csv(full.baselines));
}

TEST_CASE("strict merge: shards merge exactly, incomplete, mixed or damaged inputs are refused", "[integrity][merge]") {
    const json j = small_config();
    const RunResult full = run_shard(j, {});
    std::vector<MergeInput> shards;
    for (std::size_t k = 0; k < 3; ++k) shards.push_back(as_input(run_shard(j, Shard{k, 3}), "s" + std::to_string(k)));
    const RunResult m = merge_inputs({shards[2], shards[0], shards[1]});
    REQUIRE(to_csv(m.errors) == to_csv(full.errors));
    REQUIRE(to_csv(m.summary) == to_csv(full.summary));
    REQUIRE(m.info["shard"]["cells"] == full.info["shard"]["cells"]);

    REQUIRE_THROWS_WITH(merge_inputs({shards[0], shards[2]}), Catch::Contains("incomplete shard set: shard(s) 1 of 3"));
    MergeOptions partial;
    partial.allow_partial = true;
    const RunResult p = merge_inputs({shards[0], shards[2]}, partial);
    REQUIRE(p.info["partial"] == true);
    REQUIRE_THROWS_WITH(merge_inputs({shards[0], shards[1], shards[2], shards[1]}), Catch::Contains("again"));

    auto with = [&](const std::string& path, const json& value) {
        json c = j;
        set_path(c, path, value);
        return as_input(run_shard(c, Shard{1, 3}), "x");
    };
    REQUIRE_THROWS_WITH(merge_inputs({shards[0], with("causal", true), shards[2]}), Catch::Contains("in causal: true vs false"));
    REQUIRE_THROWS_WITH(merge_inputs({shards[0], with("trials", 3), shards[2]}), Catch::Contains("in trials: 3 vs 2"));
    REQUIRE_THROWS_WITH(merge_inputs({shards[0], with("variants.0.epsilon", 1e-6), shards[2]}),
                        Catch::Contains("variant \"positive-orthogonal\" differs"));

    // Damaged inputs: each refused with one line, never read as something else.
    auto damaged = [&](auto edit) {
        MergeInput in = shards[1];
        edit(in);
        return merge_inputs({shards[0], in, shards[2]});
    };
    auto replace_first = [](std::string& s, const std::string& a, const std::string& b) {
        const auto at = s.find(a);
        REQUIRE(at != std::string::npos);
        s.replace(at, a.size(), b);
    };
    REQUIRE_THROWS_WITH(damaged([&](MergeInput& in) {
                            json r = json::parse(in.run_json);
                            r["config"].erase("variants");
                            in.run_json = r.dump();
                        }),
                        Catch::Contains("variants: missing"));
    REQUIRE_THROWS_WITH(damaged([&](MergeInput& in) { replace_first(*in.errors, ",32,4,", ",6x4,4,"); }),
                        Catch::Contains("L: '6x4' is not a count"));
    REQUIRE_THROWS_WITH(damaged([&](MergeInput& in) {   // output_mse, after the 10th comma of line 2
                            std::size_t at = in.errors->find('\n');
                            for (int c = 0; c < 10; ++c) at = in.errors->find(',', at + 1);
                            in.errors->insert(at + 1, "x");
                        }),
                        Catch::Contains("output_mse: 'x") && Catch::Contains("is not a number"));
    REQUIRE_THROWS_WITH(damaged([&](MergeInput& in) {
                            const auto line = in.errors->find('\n', in.errors->find('\n') + 1);
                            in.errors->insert(in.errors->rfind(',', line) + 1, "1.5");
                        }),
                        Catch::Contains("nonfinite: '1.5") && Catch::Contains("is not a count"));
    REQUIRE_THROWS_WITH(damaged([&](MergeInput& in) { in.errors->erase(in.errors->rfind('\n', in.errors->size() - 2) + 1); }),
                        Catch::Contains("incomplete"));
    REQUIRE_THROWS_WITH(damaged([&](MergeInput& in) { in.errors.reset(); }), Catch::Contains("errors.csv: missing"));
    MergeInput moved = shards[1];
    json r = json::parse(moved.run_json);
    r["shard"]["index"] = 0;
    moved.run_json = r.dump();
    REQUIRE_THROWS_WITH(merge_inputs({moved}, partial), Catch::Contains("a cell of shard 1/3, but run.json says shard 0/3"));
    REQUIRE_THROWS_WITH(damaged([&](MergeInput& in) { replace_first(*in.errors, "trig v2 (a=1)", "trig \"v2\""); }),
                        Catch::Contains("a quoted cell"));
}

TEST_CASE("variant names are one CSV cell: commas, quotes, control characters and pipes are refused", "[integrity]") {
    for (const char* bad : {"a,b", "a\"b", "a\nb", "a\tb", "a|b", ""}) {
        json j = small_config();
        j["variants"][0]["name"] = bad;
        REQUIRE_THROWS_WITH(parse_config(j, "c.json"), Catch::StartsWith("c.json: variants[0].name: must"));
    }
    json j = small_config();
    j["variants"][0]["name"] = "pos;orth 'x' \xce\xb1";
    REQUIRE_NOTHROW(parse_config(j, "c.json"));
}

TEST_CASE("json_difference names the first differing field", "[integrity]") {
    REQUIRE(json_difference(json{{"a", 1}}, json{{"a", 1}}).empty());
    REQUIRE(json_difference(json{{"a", {1, 2}}}, json{{"a", {1, 3}}}) == "a[1]: 2 vs 3");
    REQUIRE(json_difference(json{{"a", 1}}, json::object()) == "a: 1 vs (absent)");
}
