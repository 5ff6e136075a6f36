// libFuzzer target for the .npy parser: any byte string must either parse or throw
// favor::Error with a one-line message naming the input; never crash, overread or hang.
// Build and run with scripts/fuzz.sh (seeds: tests/data/npy_*).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "favor/core/error.hpp"
#include "favor/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const favor::NpyArray a = favor::parse_npy("fuzz.npy", reinterpret_cast<const char*>(data), size);
        // Invariants of a successful parse.
        std::size_t n = 1;
        for (std::size_t d : a.shape) n *= d;
        if (n != a.data.size() || a.data.size() > size) std::abort();
        (void)favor::first_nonfinite(a);
    } catch (const favor::Error& e) {
        const std::string msg = e.what();
        if (msg.rfind("fuzz.npy: ", 0) != 0 || msg.find('\n') != std::string::npos) std::abort();
    }
    return 0;
}
