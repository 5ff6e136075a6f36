#include "favor/experiments/experiment.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <thread>

#include "favor/core/blas.hpp"
#include "favor_git_commit.h"
#include "experiments/experiment_parts.hpp"
#include "favor/core/parallel.hpp"
#include "favor/experiments/run_inputs.hpp"
#include "favor/io/sha256.hpp"

namespace favor {

using nlohmann::json;

const std::vector<std::string>& approximation_key_columns() {
    static const std::vector<std::string> k = {"variant", "features", "projection", "L", "d", "m", "num_features", "scale"};
    return k;
}

std::vector<std::string> baseline_key_columns(bool per_head) {
    std::vector<std::string> k = {"L", "d", "scale"};
    if (per_head) k.push_back("head");
    return k;
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::string version_text() {
    return std::string("favor ") + FAVOR_VERSION + " (git " + FAVOR_GIT_COMMIT + ", " + FAVOR_BUILD_TYPE + ", " +
           FAVOR_COMPILER + (std::string(FAVOR_MARCH_FLAG).empty() ? "" : std::string(", -march=") + FAVOR_MARCH_FLAG) +
           ", " + blas_info() + ")";
}

json environment_info(int threads) {
    json j;
    j["favor_version"] = FAVOR_VERSION;
    j["git_commit"] = FAVOR_GIT_COMMIT;
    j["build_type"] = FAVOR_BUILD_TYPE;
    j["compiler"] = FAVOR_COMPILER;
    j["march"] = FAVOR_MARCH_FLAG;
    j["blas"] = blas_info();
    j["threads"] = resolve_threads(threads);
    char host[256] = {0};
    if (::gethostname(host, sizeof host - 1) == 0) j["host"] = host;
    std::ifstream cpu("/proc/cpuinfo");
    for (std::string line; std::getline(cpu, line);)
        if (line.rfind("model name", 0) == 0) {
            j["cpu"] = line.substr(line.find(':') + 2);
            break;
        }
    j["hardware_threads"] = std::thread::hardware_concurrency();
    const std::time_t now = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    j["start_time"] = buf;
    return j;
}

RunResult run_experiment(const Config& cfg, const RunOptions& opt) {
    set_blas_single_threaded();
    json info;
    info["config"] = cfg.resolved();
    info["config_file"] = cfg.file;
    info["seed"] = cfg.seed;
    info["environment"] = environment_info(opt.threads);
    info["shard"] = {{"index", opt.shard.index}, {"count", opt.shard.count}};
    const auto t0 = std::chrono::steady_clock::now();
    RunResult r;
    switch (cfg.experiment) {
        case ExperimentKind::approximation:
            r = run_approximation_experiment(cfg, opt, info);
            break;
        case ExperimentKind::kernel:
            r = run_kernel_experiment(cfg, opt, info);
            break;
        case ExperimentKind::timing:
            r = run_timing_experiment(cfg, opt, info);
            break;
    }
    r.info["wall_seconds"] = seconds_since(t0);
    return r;
}

json run_identity(const Config& cfg, const Shard& shard) {
    json config = cfg.resolved();
    config.erase("output_dir");
    json id{{"config", config},
            {"shard", {{"index", shard.index}, {"count", shard.count}}},
            {"build", {{"favor_version", FAVOR_VERSION}, {"git_commit", FAVOR_GIT_COMMIT},
                       {"compiler", FAVOR_COMPILER}, {"march", FAVOR_MARCH_FLAG}, {"blas", blas_info()}}}};
    // Every file the run reads, by its content (design.md section 6, "Resume"): a replaced or
    // rewritten input, whatever its size and mtime, makes another run. One .npz may hold q, k, v.
    for (const auto& [field, path] : run_input_files(cfg)) {
        if (id.contains("inputs") && id["inputs"].contains(path)) continue;
        FileDigest f;
        try {
            f = file_sha256(path, "tensor file");
        } catch (const Error& e) {
            throw Error(cfg.file + ": " + field + ": " + e.what());
        }
        id["inputs"][path] = {{"bytes", f.bytes}, {"sha256", f.sha256}};
    }
    return id;
}

}  // namespace favor
