#pragma once
// A fresh directory of the tests' own (mkdtemp under the system temp dir: unique per process
// and call), removed with everything in it at the end of the scope.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace favor_test {

struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& tag = "test") {
        std::string tmpl = (std::filesystem::temp_directory_path() / ("favor_" + tag + "_XXXXXX")).string();
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string operator/(const std::string& name) const { return (path / name).string(); }
    void write(const std::string& file, const std::string& text) const { std::ofstream(path / file) << text; }
    std::string read(const std::string& file) const {
        std::ifstream in(path / file, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
};

}  // namespace favor_test
