#include "favor/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "favor/error.hpp"

namespace favor {

namespace fs = std::filesystem;

void write_file_atomic(const std::string& path, const std::string& content) {
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(path + ": cannot write (" + std::string(std::strerror(errno)) + ")");
    auto give_up = [&](const std::string& what) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        ::unlink(tmp.c_str());
        throw Error(path + ": " + what + " (" + why + ")");
    };
    for (std::size_t done = 0; done < content.size();) {
        const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) give_up("write failed");
        done += std::size_t(n);
    }
    // On disk before the rename, so a crash leaves the old file or the new one, whole.
    if (::fsync(fd) != 0) give_up("write failed");
    if (::close(fd) != 0) {
        ::unlink(tmp.c_str());
        throw Error(path + ": write failed (" + std::string(std::strerror(errno)) + ")");
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        ::unlink(tmp.c_str());
        throw Error(path + ": cannot replace (" + why + ")");
    }
}

void check_output_dir(const std::string& dir) {
    std::error_code ec;
    fs::path p(dir);
    if (fs::exists(p, ec)) {
        if (!fs::is_directory(p, ec)) throw Error(dir + ": --out is not a directory");
        if (::access(dir.c_str(), W_OK | X_OK) != 0) throw Error(dir + ": output directory is not writable");
        return;
    }
    // The nearest existing ancestor must be a writable directory.
    fs::path a = fs::absolute(p, ec).parent_path();
    while (!a.empty() && !fs::exists(a, ec)) a = a.parent_path();
    if (a.empty() || !fs::is_directory(a, ec))
        throw Error(dir + ": cannot create output directory (" + a.string() + " is not a directory)");
    if (::access(a.c_str(), W_OK | X_OK) != 0)
        throw Error(dir + ": cannot create output directory (" + a.string() + " is not writable)");
}

void make_output_dir(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error(dir + ": cannot create output directory (" + ec.message() + ")");
}

}  // namespace favor
