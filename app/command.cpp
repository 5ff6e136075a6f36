// The helpers every command shares (command.hpp).
#include "command.hpp"

#include <filesystem>
#include <iostream>

#include "favor/core/names.hpp"
#include "favor/runs/run_session.hpp"

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

MemoryBudget budget_of(const std::string& cmd, const Text& max_memory) { return budget_of_text(cmd, max_memory.get()); }

void note_estimate(double peak, const MemoryBudget& budget, const std::string& where) {
    g_estimate = "estimated peak " + format_bytes(peak) + where + ", budget " + format_bytes(double(budget.bytes)) +
                 " (" + budget.source + ")";
}

const std::string& estimate_note() { return g_estimate; }

}  // namespace favor::cli
