#pragma once
// The test corpora's files (tests/data/*_good, *_bad): their bytes and their manifests. Shared
// by test_npy.cpp and test_tensor_file.cpp.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace favor_test {

// The bytes of a file ("" when it cannot be read).
inline std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// The lines of a manifest ("file<TAB>text" or "file word word ..."), '#' comments skipped.
inline std::vector<std::string> manifest_lines(const std::string& path) {
    std::vector<std::string> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line[0] != '#') out.push_back(line);
    return out;
}

}  // namespace favor_test
