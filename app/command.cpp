// The helpers every command shares (command.hpp).
#include "command.hpp"

#include <filesystem>
#include <iostream>

#include "favor/flag_values.hpp"
#include "favor/names.hpp"

namespace favor::cli {
namespace {
std::string g_estimate;
}  // namespace

void bind(CLI::App& sub, Text& t, const std::string& name, const std::string& help) {
    t.opt = sub.add_option(name, t.value, help);
}

void bind(CLI::App& sub, std::initializer_list<FlagSpec> flags) {
    for (const FlagSpec& f : flags) bind(sub, *f.text, f.name, f.help);
}

std::string joined(const std::vector<std::string>& items) {
    std::string s;
    for (const auto& x : items) s += (s.empty() ? "" : ", ") + x;
    return s;
}

void warn(const std::string& msg) { std::cerr << "favor: warning: " << one_line(msg) << "\n"; }

std::string absolute_dir(const std::string& path) {
    std::error_code ec;
    std::string s = std::filesystem::absolute(path, ec).lexically_normal().string();
    if (ec) return path;
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
}

MemoryBudget budget_of(const std::string& cmd, const Text& max_memory) {
    if (max_memory) return memory_budget(parse_size_text(cmd + ": --max-memory", *max_memory));
    return memory_budget();
}

int threads_of(const std::string& cmd, const Text& t) {
    return t ? int(parse_uint_text(cmd + ": --threads", *t, 0, 1000000)) : 0;
}

void note_estimate(double peak, const MemoryBudget& budget, const std::string& where) {
    g_estimate = "estimated peak " + format_bytes(peak) + where + ", budget " + format_bytes(double(budget.bytes)) +
                 " (" + budget.source + ")";
}

const std::string& estimate_note() { return g_estimate; }

}  // namespace favor::cli
