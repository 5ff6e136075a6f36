#include "favor/io/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "favor/core/error.hpp"
#include "favor/core/names.hpp"

namespace favor {

namespace fs = std::filesystem;

namespace {

std::string why(int err) { return std::strerror(err); }

// "a FIFO", "a directory", ... for a file type from stat.
std::string kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

}  // namespace

void refuse_nul(const std::string& path) {
    if (const std::string p = nul_problem(path); !p.empty()) throw Error(path + ": " + p);
}

std::string absolute_dir(const std::string& path) {
    std::error_code ec;
    std::string s = std::filesystem::absolute(path, ec).lexically_normal().string();
    if (ec) return path;
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
}

void refuse_link(const std::string& given) {
    refuse_nul(given);
    std::string path = given;   // without trailing '/' (which would make lstat follow the link)
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return;
    std::error_code ec;
    const fs::path to = fs::read_symlink(path, ec);
    throw Error(path + ": is a symbolic link" + (ec ? std::string() : " (to " + to.string() + ")") +
                "; favor writes its outputs in place, never through a link (give the target, or remove the link)");
}

std::string output_target(const std::string& path) {
    refuse_link(path);   // dangling or not: checked before any work, never followed (issue 36)
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        throw Error(path + ": is " + kind_of(st.st_mode) + ", not a regular file (favor replaces an output file whole)");
    return path;
}

namespace {
// Why one of favor's own files cannot be used as it is (its lstat or fstat mode), or "".
std::string own_file_problem(const std::string& path, mode_t mode) {
    if (S_ISREG(mode)) return "";
    return path + ": is " + (S_ISLNK(mode) ? std::string("a symbolic link") : kind_of(mode)) +
           "; favor writes its own files only as regular files, in place (remove it)";
}
}  // namespace

void check_own_file(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;   // missing: created when first written
    if (const std::string p = own_file_problem(path, st.st_mode); !p.empty()) throw Error(p);
}

int open_own_file(const std::string& path, int flags) {
    refuse_nul(path);
    const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ELOOP) throw Error(own_file_problem(path, S_IFLNK));
    if (fd < 0) throw Error(path + ": cannot open (" + why(errno) + ")");
    struct stat st {};
    std::string problem = ::fstat(fd, &st) != 0 ? path + ": cannot stat (" + why(errno) + ")"
                                                : own_file_problem(path, st.st_mode);
    const int now = ::fcntl(fd, F_GETFL);
    if (problem.empty() && (now < 0 || ::fcntl(fd, F_SETFL, now & ~O_NONBLOCK) != 0))
        problem = path + ": cannot open (" + why(errno) + ")";
    if (!problem.empty()) {
        ::close(fd);
        throw Error(problem);
    }
    return fd;
}

namespace {

// `content` written to "<path>.tmp.<pid>" and fsynced; returns the temporary's name. Errors
// name `given` (the path as the user wrote it) and leave no temporary behind.
std::string write_temporary(const std::string& given, const std::string& path, const std::string& content) {
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    // O_EXCL | O_NOFOLLOW: never through a link planted at the temporary's name.
    (void)::unlink(tmp.c_str());   // a leftover of an earlier process with this pid
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(given + ": cannot write (" + std::string(std::strerror(errno)) + ")");
    auto give_up = [&](const std::string& what) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        ::unlink(tmp.c_str());
        throw Error(given + ": " + what + " (" + why + ")");
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
        throw Error(given + ": write failed (" + std::string(std::strerror(errno)) + ")");
    }
    return tmp;
}

// Renames the temporary onto `path` (a link there is replaced itself, never written through).
void replace_with(const std::string& given, const std::string& tmp, const std::string& path) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        ::unlink(tmp.c_str());
        throw Error(given + ": cannot replace (" + why + ")");
    }
}

}  // namespace

void write_file_atomic(const std::string& given, const std::string& content) {
    const std::string path = output_target(given);   // a link or a non-regular file: refused before writing
    replace_with(given, write_temporary(given, path, content), path);
}

void write_own_files(const std::vector<std::pair<std::string, std::string>>& files) {
    for (const auto& f : files) check_own_file(f.first);   // a link or a non-regular file: refused
    std::vector<std::string> tmps;
    try {
        for (const auto& f : files) tmps.push_back(write_temporary(f.first, f.first, f.second));
    } catch (...) {
        for (const auto& t : tmps) ::unlink(t.c_str());
        throw;
    }
    // rename(2) replaces whatever is at the name now (a link planted since the check is
    // replaced itself, a directory makes it fail): nothing is written through a link.
    for (std::size_t i = 0; i < files.size(); ++i) {
        try {
            replace_with(files[i].first, tmps[i], files[i].first);
        } catch (...) {
            for (std::size_t j = i + 1; j < files.size(); ++j) ::unlink(tmps[j].c_str());
            throw;
        }
    }
}

namespace {

// Creates a file in `dir` and removes it again; the errno of the failure, or 0.
int probe_dir(const std::string& dir) {
    const std::string probe = dir + "/.favor-probe." + std::to_string(::getpid());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    ::close(fd);
    ::unlink(probe.c_str());
    return 0;
}

}  // namespace

RegularFile open_regular_file(const std::string& path, const std::string& what) {
    refuse_nul(path);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error(path + ": cannot open " + what + " (" + why(errno) + ")");
    auto check = [&](const struct stat& s) {
        if (!S_ISREG(s.st_mode)) {
            const std::string k = kind_of(s.st_mode);
            throw Error(path + ": is " + (k == "not a regular file" ? "not a regular file" : k + ", not a regular file") +
                        " (expected a " + what + ")");
        }
    };
    check(st);
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open " + what + " (" + why(errno) + ")");
    try {
        if (::fstat(fd, &st) != 0) throw Error(path + ": cannot stat (" + why(errno) + ")");
        check(st);
        const int flags = ::fcntl(fd, F_GETFL);
        if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
            throw Error(path + ": cannot open " + what + " (" + why(errno) + ")");
    } catch (...) {
        ::close(fd);
        throw;
    }
    return {fd, static_cast<std::size_t>(st.st_size)};
}

std::string read_regular_file(const std::string& path, const std::string& what, std::size_t max_bytes) {
    const RegularFile f = open_regular_file(path, what);
    std::string text;
    try {
        if (f.size > max_bytes)
            throw Error(path + ": " + what + " is " + std::to_string(f.size) + " bytes, more than the limit of " +
                        std::to_string(max_bytes));
        // Read to the end (a file may grow meanwhile), never beyond the limit.
        char buf[65536];
        for (;;) {
            const ssize_t n = ::read(f.fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw Error(path + ": read error (" + why(errno) + ")");
            if (n == 0) break;
            text.append(buf, std::size_t(n));
            if (text.size() > max_bytes)
                throw Error(path + ": " + what + " is more than the limit of " + std::to_string(max_bytes) + " bytes");
        }
    } catch (...) {
        ::close(f.fd);
        throw;
    }
    ::close(f.fd);
    return text;
}

std::optional<std::string> read_file_if_exists(int dirfd, const std::string& name, const std::string& shown) {
    refuse_nul(name);
    const int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return std::nullopt;
        throw Error(shown + ": cannot open (" + why(errno) + ")");
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(shown + ": not a regular file");
    }
    std::string text;
    char buf[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const std::string w = why(errno);
            ::close(fd);
            throw Error(shown + ": cannot read (" + w + ")");
        }
        if (n == 0) break;
        text.append(buf, std::size_t(n));
    }
    ::close(fd);
    return text;
}

void check_output_dir(const std::string& dir) {
    if (dir.empty()) throw Error("output directory: must not be empty");
    refuse_link(dir);   // never created or swapped in through a link
    std::error_code ec;
    const fs::path p(dir);
    if (fs::exists(p, ec)) {
        if (!fs::is_directory(p, ec)) throw Error(dir + ": --out is not a directory");
        if (const int err = probe_dir(dir)) throw Error(dir + ": cannot write in output directory (" + why(err) + ")");
        return;
    }
    // Create what is missing, probe, and remove what was created (deepest first).
    std::vector<fs::path> created;
    for (fs::path a = fs::absolute(p, ec); !a.empty() && !fs::exists(a, ec); a = a.parent_path()) {
        created.push_back(a);
        if (a == a.parent_path()) break;
    }
    auto undo = [&] {
        for (const fs::path& c : created) ::rmdir(c.c_str());
    };
    for (auto it = created.rbegin(); it != created.rend(); ++it)
        if (::mkdir(it->c_str(), 0755) != 0 && errno != EEXIST) {
            const int err = errno;
            undo();
            throw Error(dir + ": cannot create output directory (" + why(err) + ")");
        }
    const int err = probe_dir(dir);
    undo();
    if (err) throw Error(dir + ": cannot create output directory (" + why(err) + ")");
}

void check_output_file(const std::string& given) {
    if (given.empty()) throw Error("output file: must not be empty");
    const std::string path = output_target(given);
    std::error_code ec;
    const fs::path p(path);
    const fs::path parent = fs::absolute(p, ec).parent_path();
    if (!fs::is_directory(parent, ec)) throw Error(given + ": cannot write (" + parent.string() + " is not a directory)");
    if (const int err = probe_dir(parent.string())) throw Error(given + ": cannot write (" + why(err) + ")");
}


}  // namespace favor
