#include "favor/experiments/result_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "favor/core/error.hpp"
#include "favor/io/files.hpp"

namespace favor {

namespace fs = std::filesystem;

namespace {

std::string why() { return std::strerror(errno); }

// Test hooks (tests/cli/cli_integrity.sh; docs/design.md section 6): FAVOR_TEST_WRITE_PAUSE_MS
// sleeps after every step of replace(), so a test can kill -9 the process at any of them;
// FAVOR_TEST_NO_EXCHANGE=1 takes the two-rename path; FAVOR_TEST_FAIL_WRITE=N makes the
// N-th file of the set fail as a full disk would (for machines that cannot mount a tmpfs).
long env_number(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::strtol(v, nullptr, 10) : 0;
}
void test_pause() {
    static const long ms = env_number("FAVOR_TEST_WRITE_PAUSE_MS");
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

struct Place {
    std::string out, parent, name;
};

// OUT as an absolute, normalised path with symlinks resolved (its parents'; an OutputDir
// refuses an OUT that is itself a link).
Place resolve(const std::string& dir) {
    if (dir.empty()) throw Error("--out: empty path");
    refuse_nul(dir);
    std::error_code ec;
    fs::path p = fs::absolute(dir, ec).lexically_normal();
    if (ec) throw Error(dir + ": cannot resolve the path (" + ec.message() + ")");
    if (p.filename().empty()) p = p.parent_path();   // trailing slash
    const fs::path c = fs::weakly_canonical(p, ec);
    // A link loop (or a part that cannot be searched) fails now, not at the journal's first write.
    if (ec) throw Error(dir + ": cannot resolve the path (" + ec.message() + ")");
    p = c;
    if (!p.has_parent_path() || p.parent_path() == p || p.filename().empty() || p.filename() == "." ||
        p.filename() == "..")
        throw Error(dir + ": cannot be an output directory (it has no parent to swap it in)");
    return {p.string(), p.parent_path().string(), p.filename().string()};
}

std::string lock_path(const Place& p) { return p.parent + "/." + p.name + ".favor-lock"; }

// flock on the lock file, the pid written inside. The lock file may be unlinked by its
// previous holder at release; a lock taken on an unlinked inode is retried.
int acquire(const Place& p, const std::string& given) {
    const std::string path = lock_path(p);
    for (int attempt = 0; attempt < 100; ++attempt) {
        int fd = -1;
        try {
            fd = open_own_file(path, O_RDWR | O_CREAT);   // never through a link or a device
        } catch (const Error& e) {
            throw Error(given + ": cannot create the lock (" + e.what() + ")");
        }
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int e = errno;
            // The holder writes its pid just after taking the lock: wait a moment for it.
            std::string pid;
            for (int tries = 0; tries < 20 && (pid.empty() || pid.back() != '\n'); ++tries) {
                if (tries) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                char buf[32] = {0};
                const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
                pid = n > 0 ? std::string(buf, std::size_t(n)) : "";
            }
            ::close(fd);
            if (e != EWOULDBLOCK) throw Error(given + ": cannot lock " + path + " (" + std::strerror(e) + ")");
            while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
            throw Error(given + ": another favor process (pid " + (pid.empty() ? "unknown" : pid) +
                        ") is writing this output directory; wait for it or choose another --out");
        }
        struct stat a {}, b {};
        if (::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
            const std::string pid = std::to_string(::getpid()) + "\n";
            if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
                // The lock holds without the pid; the message of a second process says "unknown".
            }
            return fd;
        }
        ::close(fd);   // unlinked by its last holder meanwhile: take the new one
    }
    throw Error(given + ": cannot lock " + path + " (it keeps changing)");
}

void release(const std::string& path, int fd) {
    if (fd < 0) return;
    ::unlink(path.c_str());   // while still holding it; see acquire()
    ::close(fd);
}

void fsync_dir(const std::string& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)::fsync(fd);
    ::close(fd);
}

// One file of a new set: exclusive create, full write, fsync. Returns "" or why it failed.
std::string write_new_file(const std::string& path, const std::string& content, bool inject_full) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return why();
    std::string failed;
    if (inject_full) failed = std::string(std::strerror(ENOSPC)) + ", injected by FAVOR_TEST_FAIL_WRITE";
    for (std::size_t done = 0; failed.empty() && done < content.size();) {
        const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) failed = n < 0 ? why() : "nothing written";
        else done += std::size_t(n);
    }
    if (failed.empty() && ::fsync(fd) != 0) failed = why();
    if (::close(fd) != 0 && failed.empty()) failed = why();
    return failed;
}

std::string nonce() {
    std::random_device rd;
    const std::uint64_t v = (std::uint64_t(rd()) << 32) ^ rd() ^
                            std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

// "tmp" or "old" if `entry` is "." + name + ".favor-(tmp|old)-PID-NONCE", else "".
std::string leftover_kind(const std::string& entry, const std::string& name) {
    const std::string prefix = "." + name + ".favor-";
    if (entry.size() <= prefix.size() + 4 || entry.compare(0, prefix.size(), prefix) != 0) return "";
    const std::string kind = entry.substr(prefix.size(), 3);
    if ((kind != "tmp" && kind != "old") || entry[prefix.size() + 3] != '-') return "";
    const std::string rest = entry.substr(prefix.size() + 4);   // PID-NONCE
    const auto dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos || rest.size() - dash - 1 != 16) return "";
    for (std::size_t i = 0; i < dash; ++i)
        if (rest[i] < '0' || rest[i] > '9') return "";
    for (std::size_t i = dash + 1; i < rest.size(); ++i)
        if (!std::isxdigit(static_cast<unsigned char>(rest[i])) || std::isupper(static_cast<unsigned char>(rest[i])))
            return "";
    return kind;
}

}  // namespace

bool is_favor_temporary_name(const std::string& base) {
    if (base.size() < 2 || base[0] != '.') return false;
    const std::string lock = ".favor-lock";
    if (base.size() > lock.size() + 1 && base.compare(base.size() - lock.size(), lock.size(), lock) == 0) return true;
    for (const char* kind : {".favor-tmp-", ".favor-old-"}) {
        const auto at = base.rfind(kind);
        if (at != std::string::npos && at > 1 && !leftover_kind(base, base.substr(1, at - 1)).empty()) return true;
    }
    return false;
}

OutputDir::OutputDir(const std::string& dir, SetKind kind) : given_(dir) {
    // Never swapped in through a link (a dangling one failed only at the swap, after the work).
    refuse_link(dir);
    const Place p = resolve(dir);
    out_ = p.out, parent_ = p.parent, name_ = p.name;
    std::error_code ec;
    // The nearest existing ancestor must be a writable directory; missing parents are created.
    fs::path a = parent_;
    std::vector<fs::path> missing;
    while (!a.empty() && !fs::exists(a, ec)) missing.push_back(a), a = a.parent_path();
    if (a.empty() || !fs::is_directory(a, ec))
        throw Error(dir + ": cannot create output directory (" + a.string() + " is not a directory)");
    if (::access(a.c_str(), W_OK | X_OK) != 0)
        throw Error(dir + ": cannot create output directory (" + a.string() + " is not writable)");
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
        if (::mkdir(it->c_str(), 0755) != 0 && errno != EEXIST)
            throw Error(dir + ": cannot create output directory " + it->string() + " (" + why() + ")");
        created_.push_back(it->string());
    }
    try {
        lock_fd_ = acquire(p, given_);
        clean_leftovers();
        struct stat st {}, pst {};
        if (::stat(out_.c_str(), &st) == 0) {
            if (!S_ISDIR(st.st_mode)) throw Error(dir + ": --out is not a directory");
            if (::stat(parent_.c_str(), &pst) == 0 && pst.st_dev != st.st_dev)
                throw Error(dir + ": is a mount point; favor replaces its output directory whole, so use a directory inside it");
            if (::access(out_.c_str(), W_OK | X_OK) != 0) throw Error(dir + ": output directory is not writable");
            bool any = false, result_set = false, only_tensors = true;
            for (const auto& e : fs::directory_iterator(out_, ec)) {
                any = true;
                const std::string n = e.path().filename().string();
                if (n == "run.json" || n == "journal.jsonl") result_set = true;
                only_tensors = only_tensors && (n == "q.npy" || n == "k.npy" || n == "v.npy");
                if (e.is_directory(ec) && !e.is_symlink(ec))
                    throw Error(dir + ": contains the directory " + n +
                                "; favor replaces its output directory whole and will not delete it "
                                "(move it or choose another --out)");
            }
            if (ec) throw Error(dir + ": cannot list (" + ec.message() + ")");
            if (any && kind == SetKind::tensors && !only_tensors)
                throw Error(dir + ": not empty and not a directory of favor gen (it holds more than q.npy, k.npy, "
                                  "v.npy, and favor replaces it whole); choose another --out");
            if (any && kind == SetKind::results && !result_set)
                throw Error(dir + ": not empty and not a favor result directory (no run.json); choose another --out");
        }
        if (::access(parent_.c_str(), W_OK | X_OK) != 0)
            throw Error(dir + ": its parent " + parent_ + " is not writable (the new result set is swapped in beside it)");
    } catch (...) {
        release(lock_path(p), lock_fd_);
        lock_fd_ = -1;
        for (auto it = created_.rbegin(); it != created_.rend(); ++it) ::rmdir(it->c_str());
        throw;
    }
}

OutputDir::~OutputDir() {
    release(lock_path({out_, parent_, name_}), lock_fd_);
    if (committed_) return;
    // Nothing committed: leave no trace of this process but what it was asked to keep (a
    // journal with entries keeps OUT non-empty, and rmdir leaves non-empty directories).
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) ::rmdir(it->c_str());
}

std::string OutputDir::file(const std::string& name) const { return out_ + "/" + name; }

void OutputDir::ensure_exists() {
    if (::mkdir(out_.c_str(), 0755) == 0) created_.push_back(out_);
    else if (errno != EEXIST) throw Error(given_ + ": cannot create output directory (" + why() + ")");
}

void OutputDir::refuse_inside(const std::string& path, const std::string& field) const {
    std::error_code ec;
    const std::string p = fs::weakly_canonical(fs::absolute(path, ec), ec).string();
    if (!ec && p.size() > out_.size() && p.compare(0, out_.size(), out_) == 0 && p[out_.size()] == '/')
        throw Error(field + ": " + path + " is inside the output directory " + given_ +
                    ", which the run replaces whole (it would be deleted): move it or choose another --out");
}

// Under the lock, so no live process owns these names: a tmp is a set that never became
// current (or the previous one after an exchange), an old is the previous set. If OUT is
// missing, the process died between the two renames: the old set is put back.
void OutputDir::clean_leftovers() {
    std::error_code ec;
    std::vector<std::string> tmps, olds;
    for (const auto& e : fs::directory_iterator(parent_, ec)) {
        const std::string n = e.path().filename().string();
        const std::string kind = leftover_kind(n, name_);
        if (kind == "tmp") tmps.push_back(e.path().string());
        if (kind == "old") olds.push_back(e.path().string());
    }
    if (!olds.empty() && !fs::exists(out_, ec)) {
        if (::rename(olds.front().c_str(), out_.c_str()) != 0)
            throw Error(given_ + ": cannot restore the previous result set from " + olds.front() + " (" + why() + ")");
        olds.erase(olds.begin());
        fsync_dir(parent_);
    }
    for (const auto* list : {&tmps, &olds})
        for (const auto& path : *list) {
            fs::remove_all(path, ec);
            if (ec) throw Error(given_ + ": cannot remove the leftover " + path + " of a killed run (" + ec.message() + ")");
        }
}

namespace {
// Removes the unfinished new set `tmp` and throws "<given>: cannot <what> (<reason>)".
[[noreturn]] void abandon(const std::string& tmp, const std::string& given, const std::string& what,
                          const std::string& reason) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw Error(given + ": cannot " + what + " (" + reason + ")");
}

// Writes `files` into the fresh directory tmp, each file and then tmp fsynced; on failure tmp
// is removed and the error names the file (given: OUT as the user gave it).
void write_set(const std::string& tmp, const ResultFiles& files, const std::string& given) {
    std::error_code ec;
    const long fail_at = env_number("FAVOR_TEST_FAIL_WRITE");
    try {
        long k = 0;
        for (const auto& [name, content] : files) {
            const std::string failed = write_new_file(tmp + "/" + name, content, ++k == fail_at);
            if (!failed.empty())
                throw Error(given + ": cannot write the new result set (" + name + ": " + failed +
                            "); the previous one is untouched");
            test_pause();
        }
        fsync_dir(tmp);
    } catch (...) {
        fs::remove_all(tmp, ec);
        throw;
    }
}

// Puts the complete set tmp in place of out and returns where the previous set now is ("" if
// out did not exist): tmp itself after an atomic exchange, else `aside`, where it is moved
// first (no RENAME_EXCHANGE here, e.g. NFS: out is missing between the two renames).
std::string swap_in(const std::string& tmp, const std::string& out, const std::string& aside,
                    const std::string& given) {
    struct stat st {};
    if (::lstat(out.c_str(), &st) != 0) {
        if (::rename(tmp.c_str(), out.c_str()) != 0) abandon(tmp, given, "move the new result set in place", why());
        return "";
    }
#ifdef RENAME_EXCHANGE
    if (env_number("FAVOR_TEST_NO_EXCHANGE") == 0) {
        if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0) return tmp;
        if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
            abandon(tmp, given, "swap in the new result set", why());
    }
#endif
    if (::rename(out.c_str(), aside.c_str()) != 0) abandon(tmp, given, "move the previous result set aside", why());
    test_pause();
    if (::rename(tmp.c_str(), out.c_str()) != 0) {
        const std::string reason = why();
        (void)::rename(aside.c_str(), out.c_str());
        abandon(tmp, given, "move the new result set in place", reason);
    }
    return aside;
}
}  // namespace

void OutputDir::replace(const ResultFiles& files) {
    const std::string id = std::to_string(::getpid()) + "-" + nonce();
    const std::string tmp = parent_ + "/." + name_ + ".favor-tmp-" + id;
    if (::mkdir(tmp.c_str(), 0755) != 0) throw Error(given_ + ": cannot create " + tmp + " (" + why() + ")");
    test_pause();
    write_set(tmp, files, given_);
    // where the previous set ends up
    const std::string previous = swap_in(tmp, out_, parent_ + "/." + name_ + ".favor-old-" + id, given_);
    committed_ = true;
    test_pause();
    fsync_dir(parent_);
    std::error_code ec;
    if (!previous.empty()) fs::remove_all(previous, ec);   // a leftover is cleaned by the next run
}

OutputLock::OutputLock(const std::string& dir) {
    const Place p = resolve(dir);
    path_ = lock_path(p);
    // Where this user cannot create the lock, no run of theirs can swap the set either.
    if (::access(p.parent.c_str(), W_OK | X_OK) != 0) return;
    fd_ = acquire(p, dir);
}

OutputLock::~OutputLock() { release(path_, fd_); }

}  // namespace favor
