// libFuzzer target for the --set parser (json_text.cpp, apply_set): any bytes as a PATH=VALUE
// assignment applied to a small valid config either give a config that parses and dumps, or
// raise favor::Error (no '=', empty value, non-UTF-8 bytes, nesting deeper than
// kMaxJsonDepth, a path into a scalar, a field out of range); anything else (a crash, a
// sanitizer report, nlohmann's own exception from dumping a bad string, a stack overflow in a
// recursive dump) is a bug. Long inputs matter (deep nesting needs > 100 KB): scripts/fuzz.sh
// runs it with -max_len 262144. Build with -DFAVOR_FUZZ=ON (clang), run via scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "favor/core/error.hpp"
#include "favor/experiments/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const nlohmann::json base = nlohmann::json::parse(
        R"({"name": "fuzz", "inputs": {"source": "random", "L": 16, "d": 4},
            "variants": [{"features": "positive", "projection": "orthogonal"}], "m": [4], "trials": 1})");
    const std::string text(reinterpret_cast<const char*>(data), size);
    nlohmann::json j = base;
    try {
        favor::apply_set(j, text);
        (void)j.dump();   // what run.json and the journal header do with the value
        const favor::Config c = favor::parse_config(j, "fuzz.json");
        (void)c.resolved().dump();
    } catch (const favor::Error&) {
    }
    return 0;
}
