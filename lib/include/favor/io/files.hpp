#pragma once
// Files in and out. Reading: only regular files are opened (a FIFO or a device given as a
// config or tensor would block or never end). Writing: atomic replacement (temporary file,
// fsync, rename), so a failed run never leaves a partial or corrupt file and earlier results
// stay intact; and the checks on an output place made before any work starts.
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace favor {

// Throws Error "<path>: holds a NUL character (\u0000) at offset N; ..." when `path` holds a
// NUL (the OS would read it cut there: another file). Every function here that opens, creates
// or checks a path calls it first, so no input or output path of any command can be cut.
void refuse_nul(const std::string& path);

// An open regular file: its descriptor (O_RDONLY | O_CLOEXEC, blocking) and size.
struct RegularFile {
    int fd = -1;
    std::size_t size = 0;
};
// Opens `path` for reading if it is a regular file: stat first, then open with O_NONBLOCK (so
// a FIFO swapped in meanwhile cannot block the open) and fstat the descriptor. Throws Error
// "<path>: cannot open <what> (No such file or directory)", "<path>: is a directory, not a
// <what>", "<path>: is a FIFO, not a <what>" and so on. The caller closes fd.
RegularFile open_regular_file(const std::string& path, const std::string& what);
// The whole content of a regular file of at most `max_bytes` bytes (Error beyond that).
std::string read_regular_file(const std::string& path, const std::string& what, std::size_t max_bytes);

// The whole content of `name` opened relative to the directory descriptor `dirfd`
// (AT_FDCWD: the working directory), or nullopt if it does not exist. O_NONBLOCK and an fstat
// after the open: anything but a regular file is an Error "<shown>: not a regular file"; other
// errors name `shown` too.
std::optional<std::string> read_file_if_exists(int dirfd, const std::string& name, const std::string& shown);

// Error "<path>: is a symbolic link (to T); favor writes its outputs in place, never through
// a link ..." when `path` itself (not its parents) is a symbolic link, dangling or not.
void refuse_link(const std::string& path);

// The file an output `path` names, checked: not a symbolic link (refuse_link; an output never
// follows one), and missing or a regular file: a device node, FIFO, socket or directory is an
// Error "<path>: is a character device, not a regular file ...", so /dev/null is never
// replaced. Returns `path`.
std::string output_target(const std::string& path);

// A directory as an absolute, normalised path without a trailing '/' (what a run prints:
// design.md section 5, Paths); the path as given if the working directory cannot be read.
std::string absolute_dir(const std::string& path);
// Opens one of favor's own files (a lock, a journal) with `flags` | O_NOFOLLOW | O_CLOEXEC
// (O_NONBLOCK while opening, so a FIFO cannot block): a symbolic link or anything but a
// regular file there is an Error naming `path`; nothing is written through it.
int open_own_file(const std::string& path, int flags);
// The same check without opening, before any work: Error if `path` exists as anything but a
// regular file (a link included).
void check_own_file(const std::string& path);

// Writes `content` to `output_target(path)` through "<path>.tmp.<pid>", fsync and rename; throws Error
// naming the path on failure and leaves no temporary file behind.
void write_file_atomic(const std::string& path, const std::string& content);
// Writes favor's own files inside a result set (`favor compare`'s tables): each (path, content)
// only as a regular file in place: Error naming the path, before anything is written, when one
// exists as a symbolic link or anything but a regular file (check_own_file). Every temporary is
// written and fsynced before the first rename, so a failed write leaves all files as they were.
void write_own_files(const std::vector<std::pair<std::string, std::string>>& files);

// Makes sure `dir` can receive results: it is a directory in which a file can be created, or
// it can be created as one. The check creates what is missing and a probe file, then removes
// them again, so a place where creation fails (under /proc, a read-only mount) is found
// before any work. Throws Error naming `dir` ("<dir>: cannot create output directory (...)").
void check_output_dir(const std::string& dir);
// The same for an output file: not a directory, and a file can be created beside it.
void check_output_file(const std::string& path);

}  // namespace favor
