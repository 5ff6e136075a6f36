// libFuzzer target for the .npz reader: any byte string must either list and read its arrays
// or throw favor::Error with a one-line message naming the input; never crash, overread, hang
// or allocate beyond what the input can fill (a deflate member's size is bounded by its
// compressed size). Build and run with scripts/fuzz.sh (seeds: tests/data/npz_good, npz_bad).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "favor/core/error.hpp"
#include "favor/io/tensor_file.hpp"

namespace {
void check_message(const favor::Error& e) {
    const std::string msg = e.what();
    if (msg.rfind("fuzz.npz", 0) != 0 || msg.find('\n') != std::string::npos) std::abort();
}

void check_array(const favor::NpyArray& a) {
    std::size_t n = 1;
    for (std::size_t d : a.shape) n *= d;
    if (n != a.data.size()) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const char* bytes = reinterpret_cast<const char*>(data);
    try {
        const auto names = favor::npz_members("fuzz.npz", bytes, size);
        for (std::size_t i = 0; i < names.size() && i < 4; ++i) {
            try {
                check_array(favor::parse_npz("fuzz.npz", bytes, size, names[i]));
            } catch (const favor::Error& e) {
                check_message(e);
            }
        }
    } catch (const favor::Error& e) {
        check_message(e);
    }
    return 0;
}
