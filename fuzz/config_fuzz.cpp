// libFuzzer target for the config parser: any bytes either parse into a valid Config or
// raise favor::Error (JSON syntax errors, NULs and repeated keys included); anything else — a crash, a sanitizer report,
// another exception — is a bug. Build with -DFAVOR_FUZZ=ON (clang), run via scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "favor/core/error.hpp"
#include "favor/experiments/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    nlohmann::json j;
    try {
        j = favor::parse_json_text(text, "fuzz.json");   // NULs, repeated keys, syntax: Error
    } catch (const favor::Error&) {
        return 0;
    }
    try {
        const favor::Config c = favor::parse_config(j, "fuzz.json");
        (void)c.resolved().dump();
    } catch (const favor::Error&) {
    }
    // --set paths on the same document.
    try {
        if (j.is_object() && !j.empty()) favor::apply_set(j, j.begin().key() + ".0.x=" + text.substr(0, 8));
    } catch (const favor::Error&) {
    }
    return 0;
}
