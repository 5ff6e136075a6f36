#pragma once
// An output directory OUT as one result set (docs/design.md section 6, "The output
// directory"). A run or merge holds OUT's lock from start to end, writes the new set into a
// temporary sibling and swaps it in whole, so a reader sees the old set or the new one, never
// a mix. Everything lives beside OUT, in its parent directory, under hidden names:
//   .NAME.favor-lock                   the lock (flock; the holder's pid inside)
//   .NAME.favor-tmp-PID-NONCE/         a result set being written (or, just after the
//                                      swap, the previous one on its way out)
//   .NAME.favor-old-PID-NONCE/         the previous set (swap without RENAME_EXCHANGE)
// Leftovers of killed processes are recognised by these exact names and removed by the next
// process that takes the lock; they are never read as results.
#include <string>
#include <utility>
#include <vector>

namespace favor {

// (file name inside the set, content)
using ResultFiles = std::vector<std::pair<std::string, std::string>>;

// What a set in OUT holds: a run's or merge's results (run.json, the tables, a journal), or
// `favor gen`'s tensors (q.npy, k.npy, v.npy, swapped in together: never two seeds mixed).
enum class SetKind { results, tensors };

class OutputDir {
public:
    // Checks that `dir` can hold a set of `kind` (missing, empty, or such a set without
    // subdirectories: results have run.json or journal.jsonl, tensors only q.npy, k.npy,
    // v.npy; its parent writable; not a mount point), creates missing parents, takes the lock
    // and cleans leftovers. Throws Error with one line naming `dir` otherwise, e.g. when
    // another live favor process holds the lock.
    explicit OutputDir(const std::string& dir, SetKind kind = SetKind::results);
    ~OutputDir();   // releases the lock; undoes what this object created if nothing was committed
    OutputDir(const OutputDir&) = delete;
    OutputDir& operator=(const OutputDir&) = delete;

    const std::string& path() const { return given_; }   // as the user wrote it (messages)
    std::string file(const std::string& name) const;      // OUT/name (OUT resolved)
    // Creates OUT if it is missing (the journal of a run lives in it).
    void ensure_exists();
    // Error "<field>: <path> is inside the output directory ..." if `path`, a file the command
    // reads (a run's .npy inputs), lies inside OUT, which replace() swaps out whole.
    void refuse_inside(const std::string& path, const std::string& field) const;
    // Writes `files` into a fresh temporary sibling (each fsynced), then swaps it in for OUT
    // (renameat2 RENAME_EXCHANGE, or two renames where the file system lacks it) and removes
    // the previous set. On failure, OUT is untouched and the temporary is removed.
    void replace(const ResultFiles& files);

private:
    std::string given_, out_, parent_, name_;
    int lock_fd_ = -1;
    std::vector<std::string> created_;   // directories this object created (deepest last)
    bool committed_ = false;
    void lock();
    void clean_leftovers();
};

// Whether `base` (a file name) is one of the hidden names above (for any OUT): `favor merge`
// refuses such directories as inputs.
bool is_favor_temporary_name(const std::string& base);

// Takes OUT's lock only (no cleaning, no checks on OUT): for commands that add a file to an
// existing result set (`favor compare`). Throws Error if another process holds it; takes
// nothing where OUT's parent is not writable (no run could replace OUT there).
class OutputLock {
public:
    explicit OutputLock(const std::string& dir);
    ~OutputLock();
    OutputLock(const OutputLock&) = delete;
    OutputLock& operator=(const OutputLock&) = delete;

private:
    std::string path_;
    int fd_ = -1;
};

}  // namespace favor
