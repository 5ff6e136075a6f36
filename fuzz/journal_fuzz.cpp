// libFuzzer target for the journal reader (journal.cpp): any bytes as OUT/journal.jsonl read
// by --resume either load, with every entry then checked as a run checks it before use
// (check_journal_entry for approximation runs, journal_kernel_value for kernel runs), or
// raise favor::Error; anything else (a crash, a sanitizer report, another exception, a stack
// overflow on deep nesting) is a bug. The first byte chooses whether a valid header of this
// identity comes first (so the entries are reached) or the whole text is fuzzed. Long inputs
// matter (deep nesting needs > 100 KB): scripts/fuzz.sh runs it with -max_len 262144.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "favor/core/error.hpp"
#include "favor/experiments/journal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const nlohmann::json identity = {{"config", {{"m", {4, 8}}, {"trials", 2}}}, {"shard", {{"index", 0}, {"count", 1}}}};
    static const std::string header =
        nlohmann::json{{"favor_journal", 1}, {"fingerprint", favor::journal_fingerprint(identity)}, {"identity", identity}}.dump();
    static const std::string path = "/tmp/favor_journal_fuzz." + std::to_string(::getpid()) + ".jsonl";
    static const std::vector<std::string> cols = {"output_mse", "attention_kl", "nonfinite", "seconds"};
    if (size == 0) return 0;
    std::string text = data[0] % 2 == 0 ? header + "\n" : "";
    text.append(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    try {
        const favor::Journal j(path, identity, /*resume=*/true);
        for (const auto& [key, rows] : j.entries()) {
            try {
                favor::check_journal_entry(j, rows, 1, cols, std::get<0>(key), std::get<2>(key));
            } catch (const favor::Error&) {
            }
            try {
                for (const auto& row : rows)
                    for (const auto& cell : row) (void)favor::journal_kernel_value(j, cell, true);
            } catch (const favor::Error&) {
            }
        }
    } catch (const favor::Error&) {
    }
    return 0;
}
