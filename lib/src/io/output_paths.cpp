// Inputs and outputs of one command are different files (output_paths.hpp).
#include "favor/io/output_paths.hpp"

#include <sys/stat.h>

#include <filesystem>

#include "favor/core/error.hpp"

namespace favor {

namespace fs = std::filesystem;

namespace {
// The canonical absolute form of a path (the existing part's links resolved), or the path
// made absolute and normal when that fails.
std::string canonical_text(const std::string& p) {
    std::error_code ec;
    const fs::path a = fs::absolute(p, ec).lexically_normal();
    const fs::path c = fs::weakly_canonical(a, ec);
    return (ec ? a : c).string();
}
}  // namespace

bool same_file(const std::string& a, const std::string& b) {
    struct stat sa {}, sb {};
    if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return canonical_text(a) == canonical_text(b);
}

void check_distinct_files(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs,
                          const std::string& cmd) {
    auto refuse = [&](const NamedPath& o, const NamedPath& other) {
        throw Error(cmd + ": " + o.role + " " + o.path + " is the same file as " + other.role + " " + other.path +
                    "; every output must differ from every input and from the other outputs");
    };
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        for (const NamedPath& in : inputs)
            if (same_file(outputs[i].path, in.path)) refuse(outputs[i], in);
        for (std::size_t j = 0; j < i; ++j)
            if (same_file(outputs[i].path, outputs[j].path)) refuse(outputs[i], outputs[j]);
    }
}

}  // namespace favor
