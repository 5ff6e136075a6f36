#pragma once
// The journal of a run (docs/design.md section 6, "Resume"): OUT/journal.jsonl, one JSON line
// per finished (cell, trial), appended as each finishes, so `favor run --resume` continues an
// interrupted run. Line 1 identifies the run; every other line is
//   {"cell": <grid index>, "trial": <t>, "rows": [[<metric cell>, ...], ...]}
// ("input_seed": <s> added when the item's input seed is not 0) with exactly the strings that go into the table (one row per head with per_head). Tables
// are rebuilt from these strings, so a resumed run writes the same bytes as an
// uninterrupted one.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace favor {

using JournalRows = std::vector<std::vector<std::string>>;

// A hex digest of `identity` (64-bit FNV-1a of its compact dump), kept in the header line.
std::string journal_fingerprint(const nlohmann::json& identity);

class Journal {
public:
    // `path`: OUT/journal.jsonl. `identity`: what a resume must match (the resolved config, the
    // shard, the build). With `resume`, an existing journal is read: its identity must equal
    // this one (Error naming the first difference otherwise), and a torn last line (a kill
    // during a write) is dropped. Without `resume`, an existing journal is replaced at the
    // first record. `prepare` runs once before the file is first written (it creates OUT).
    Journal(std::string path, nlohmann::json identity, bool resume, std::function<void()> prepare = {});
    ~Journal();
    Journal(const Journal&) = delete;
    Journal& operator=(const Journal&) = delete;

    const std::string& path() const { return path_; }
    bool existed() const { return existed_; }      // a journal file was there at the start
    std::size_t loaded() const { return entries_.size(); }
    // The entry of (cell, input seed, trial) read at the start (resume), or nullptr.
    const JournalRows* find(std::size_t cell, std::size_t trial, std::uint64_t input_seed = 0) const;
    // Appends one line with one write; thread-safe. Throws Error if the write fails.
    void record(std::size_t cell, std::size_t trial, const JournalRows& rows, std::uint64_t input_seed = 0);
    // Flushes what has been appended to the disk (fsync).
    void sync();
    // Every entry read at the start, by (cell, input seed, trial).
    const std::map<std::tuple<std::size_t, std::uint64_t, std::size_t>, JournalRows>& entries() const { return entries_; }

private:
    std::string path_;
    nlohmann::json identity_;
    std::function<void()> prepare_;
    std::map<std::tuple<std::size_t, std::uint64_t, std::size_t>, JournalRows> entries_;   // (cell, input seed, trial)
    bool existed_ = false, append_ = false, broken_ = false;
    std::string broken_why_;   // the whole message of the write that failed
    std::size_t keep_bytes_ = 0;   // valid prefix of an existing journal (resume)
    int fd_ = -1;
    std::mutex mutex_;
    void load(const std::string& text);
    void open_for_writing();
};

// A journal is not trusted: an entry is used only if it is what a fresh item writes, each
// cell checked as merge checks a table's (metric_table.hpp, metric_cell_problem).
// Approximation runs: `heads` rows of the metric columns `cols`; Error naming the entry,
// the column and the cell otherwise ("... output_mse: 'abc' is not a number ...").
void check_journal_entry(const Journal& j, const JournalRows& rows, std::size_t heads,
                         const std::vector<std::string>& cols, std::size_t cell, std::size_t trial);
// Kernel runs: one journaled squared error (row 0) or closed form (row 1; empty: none, NaN),
// checked as a kernel_mse cell and not negative (both are mean squares); Error otherwise.
double journal_kernel_value(const Journal& j, const std::string& cell, bool may_be_empty);
// A kernel entry's relative error ("bias" runs): any finite number; throws Error naming the
// journal otherwise.
double journal_signed_value(const Journal& j, const std::string& cell);

}  // namespace favor
