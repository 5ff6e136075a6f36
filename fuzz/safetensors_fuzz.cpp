// libFuzzer target for the .safetensors reader: any byte string must either list and read its
// tensors or throw favor::Error with a one-line message naming the input; never crash,
// overread or hang. Build and run with scripts/fuzz.sh (seeds: tests/data/safetensors_good,
// safetensors_bad).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "favor/core/error.hpp"
#include "favor/io/tensor_file.hpp"

namespace {
void check_message(const favor::Error& e) {
    const std::string msg = e.what();
    if (msg.rfind("fuzz.safetensors", 0) != 0 || msg.find('\n') != std::string::npos) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const char* bytes = reinterpret_cast<const char*>(data);
    try {
        const auto names = favor::safetensors_names("fuzz.safetensors", bytes, size);
        for (std::size_t i = 0; i < names.size() && i < 4; ++i) {
            try {
                const favor::NpyArray a = favor::parse_safetensors("fuzz.safetensors", bytes, size, names[i]);
                std::size_t n = 1;
                for (std::size_t d : a.shape) n *= d;
                if (n != a.data.size() || a.data.size() > size) std::abort();
            } catch (const favor::Error& e) {
                check_message(e);
            }
        }
    } catch (const favor::Error& e) {
        check_message(e);
    }
    return 0;
}
