// libFuzzer target for `favor merge`: the bytes are split at lines "@@" into files, taken
// three at a time as one input directory's run.json, errors.csv and summary.csv (a section
// "-" is a missing file). Any inputs must either merge or raise favor::Error naming an input;
// anything else (a crash, a sanitizer report, another exception) is a bug. The merged
// result must also write out (result_files). Seeds: fuzz/corpus/merge (real shard sets,
// written by scripts/make_merge_corpus.sh). Build and run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "favor/core/error.hpp"
#include "sections.hpp"
#include "favor/results/merge.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::vector<std::string> files = split_sections(text);
    std::vector<favor::MergeInput> inputs;
    for (std::size_t i = 0; i + 1 <= files.size() && inputs.size() < 8; i += 3) {
        favor::MergeInput in;
        in.dir = "in" + std::to_string(inputs.size());
        in.run_json = files[i];
        if (i + 1 < files.size() && files[i + 1] != "-") in.errors = files[i + 1];
        if (i + 2 < files.size() && files[i + 2] != "-") in.summary = files[i + 2];
        inputs.push_back(std::move(in));
    }
    for (bool partial : {false, true}) {
        try {
            favor::MergeOptions opt;
            opt.allow_partial = partial;
            const favor::RunResult r = favor::merge_inputs(inputs, opt);
            (void)favor::result_files(r);
        } catch (const favor::Error& e) {
            // Every refusal names the input directory ("in<k>/...") or says "merge:".
            const std::string msg = e.what();
            if (msg.rfind("in", 0) != 0 && msg.rfind("merge: ", 0) != 0) std::abort();
        }
    }
    return 0;
}
