#include "favor/experiments/journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "favor/core/error.hpp"
#include "favor/core/rng.hpp"
#include "favor/experiments/config.hpp"
#include "favor/io/files.hpp"
#include "favor/io/json_diff.hpp"
#include "favor/io/report.hpp"
#include "favor/metrics/metric_table.hpp"

namespace favor {

using nlohmann::json;

std::string journal_fingerprint(const json& identity) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(tag(identity.dump())));
    return buf;
}

namespace {

JournalRows parse_rows(const json& rows) {
    if (!rows.is_array()) throw std::invalid_argument("rows");
    JournalRows out;
    for (const json& r : rows) {
        if (!r.is_array()) throw std::invalid_argument("row");
        std::vector<std::string> cells;
        for (const json& c : r) {
            if (!c.is_string()) throw std::invalid_argument("cell");
            cells.push_back(c.get<std::string>());
        }
        out.push_back(std::move(cells));
    }
    return out;
}

}  // namespace

Journal::Journal(std::string path, json identity, bool resume, std::function<void()> prepare)
    : path_(std::move(path)), identity_(std::move(identity)), prepare_(std::move(prepare)) {
    check_own_file(path_);   // a link or a device here is found now, not after the first cell
    if (!resume) {
        existed_ = ::access(path_.c_str(), F_OK) == 0;   // replaced at the first record
        return;
    }
    std::string text;
    const std::optional<std::string> content = read_file_if_exists(AT_FDCWD, path_, path_);
    existed_ = content.has_value();
    if (existed_) text = *content;
    if (existed_) load(text);
}

Journal::~Journal() {
    if (fd_ >= 0) ::close(fd_);
}

// Only lines ended by '\n' count: a kill in the middle of a write leaves a torn last line,
// which is dropped (and cut off before the next append). A torn header means nothing
// finished: the journal is started afresh.
void Journal::load(const std::string& text) {
    const std::string fp = journal_fingerprint(identity_);
    std::size_t pos = 0, lineno = 0;
    while (pos < text.size()) {
        const std::size_t nl = text.find('\n', pos);
        if (nl == std::string::npos) break;   // torn last line
        const std::string line = text.substr(pos, nl - pos);
        ++lineno;
        json j;
        try {
            j = parse_json_text(line, path_ + ": line " + std::to_string(lineno));   // depth checked first
        } catch (const JsonSyntaxError&) {
            throw Error(path_ + ": line " + std::to_string(lineno) + ": not JSON (a damaged journal; rerun without --resume)");
        }
        if (lineno == 1) {
            if (!j.is_object() || j["favor_journal"] != json(1) || !j.contains("identity") || !j["fingerprint"].is_string())
                throw Error(path_ + ": not a favor journal (rerun without --resume)");
            if (j["fingerprint"].get<std::string>() != fp || j["identity"] != identity_) {
                const std::string d = json_difference(j["identity"], identity_);
                throw Error(path_ + ": written by a different run (" + (d.empty() ? "fingerprint" : d) +
                            "); rerun without --resume to start over");
            }
        } else {
            try {
                if (!j.is_object() || !j["cell"].is_number_unsigned() || !j["trial"].is_number_unsigned())
                    throw std::invalid_argument("keys");
                std::uint64_t input_seed = 0;
                if (j.contains("input_seed")) {
                    if (!j["input_seed"].is_number_unsigned() || j["input_seed"] == json(0)) throw std::invalid_argument("seed");
                    input_seed = j["input_seed"].get<std::uint64_t>();
                }
                const auto key = std::make_tuple(j["cell"].get<std::size_t>(), input_seed, j["trial"].get<std::size_t>());
                JournalRows rows = parse_rows(j["rows"]);
                const auto [it, fresh] = entries_.emplace(key, rows);
                if (!fresh && it->second != rows) throw std::invalid_argument("twice");
            } catch (const std::invalid_argument&) {
                throw Error(path_ + ": line " + std::to_string(lineno) + ": not a valid entry (rerun without --resume)");
            }
        }
        pos = nl + 1;
    }
    if (lineno == 0) return;   // nothing usable: the file is started afresh
    append_ = true;
    keep_bytes_ = pos;
}

const JournalRows* Journal::find(std::size_t cell, std::size_t trial, std::uint64_t input_seed) const {
    const auto it = entries_.find({cell, input_seed, trial});
    return it == entries_.end() ? nullptr : &it->second;
}

void Journal::open_for_writing() {
    if (prepare_) prepare_();
    const int flags = O_WRONLY | O_CREAT | (append_ ? 0 : O_TRUNC);
    fd_ = open_own_file(path_, flags);
    if (append_) {
        if (::ftruncate(fd_, off_t(keep_bytes_)) != 0 || ::lseek(fd_, 0, SEEK_END) < 0)
            throw Error(path_ + ": cannot append (" + std::string(std::strerror(errno)) + ")");
    }
}

void Journal::record(std::size_t cell, std::size_t trial, const JournalRows& rows, std::uint64_t input_seed) {
    json entry{{"cell", cell}, {"trial", trial}, {"rows", rows}};
    if (input_seed != 0) entry["input_seed"] = input_seed;   // absent: 0, as in a run without input_seeds
    std::string line = entry.dump() + "\n";
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0) {
        open_for_writing();
        if (!append_) {
            const json header{{"favor_journal", 1}, {"fingerprint", journal_fingerprint(identity_)}, {"identity", identity_}};
            line = header.dump() + "\n" + line;   // header and first entry in one write
        }
    }
    // The same line as the write that failed: items on other threads may still record after
    // it, and whichever error parallel_for rethrows, the user reads one message.
    if (broken_) throw Error(broken_why_);
    const off_t start = ::lseek(fd_, 0, SEEK_CUR);
    for (std::size_t done = 0; done < line.size();) {
        const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            // No torn line in the middle: cut the partial one off, and write nothing more.
            broken_ = true;
            broken_why_ = path_ + ": write failed (" + (n < 0 ? std::string(std::strerror(errno)) : "nothing written") +
                          "); the entries before it are kept for --resume";
            if (start >= 0) (void)::ftruncate(fd_, start);
            throw Error(broken_why_);
        }
        done += std::size_t(n);
    }
}

void Journal::sync() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ >= 0) (void)::fsync(fd_);
}

void check_journal_entry(const Journal& j, const JournalRows& rows, std::size_t heads, const std::vector<std::string>& cols,
                         std::size_t cell, std::size_t trial) {
    const std::string entry = j.path() + ": the entry of cell " + std::to_string(cell) + " trial " + std::to_string(trial);
    bool ok = rows.size() == heads;
    for (const auto& r : rows) ok = ok && r.size() == cols.size();
    if (!ok) throw Error(entry + " does not have this run's shape (rerun without --resume)");
    for (const auto& r : rows)
        for (std::size_t i = 0; i < cols.size(); ++i)
            if (const std::string why = metric_cell_problem(cols[i], r[i]); !why.empty())
                throw Error(entry + ": " + cols[i] + ": '" + r[i].substr(0, 40) + "' " + why +
                            " (a damaged journal; rerun without --resume)");
}

double journal_kernel_value(const Journal& j, const std::string& cell, bool may_be_empty) {
    double v = std::numeric_limits<double>::quiet_NaN();
    std::string why = cell.empty() && !may_be_empty ? "is empty" : metric_cell_problem("kernel_mse", cell);
    if (why.empty() && !cell.empty() && parse_real(cell, v, true) && v < 0) why = "is negative (a squared error)";
    if (!why.empty())
        throw Error(j.path() + ": '" + cell.substr(0, 40) + "' " + why + " (a damaged journal; rerun without --resume)");
    return v;
}

double journal_signed_value(const Journal& j, const std::string& cell) {
    double v = 0.0;
    if (!parse_real(cell, v, false))
        throw Error(j.path() + ": '" + cell.substr(0, 40) + "' is not a finite number (a damaged journal; rerun without --resume)");
    return v;
}

}  // namespace favor
