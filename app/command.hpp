#pragma once
// What the commands of the CLI share: the row of the command table (main.cpp), value flags
// kept as the text typed (so each is parsed whole, with an error naming the flag), and the
// lines every command prints the same way. One source file per family of commands:
// run_commands.cpp (run, validate), tensor_commands.cpp (gen, projection, apply),
// result_commands.cpp (merge, compare, list).
#include <CLI/CLI.hpp>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "favor/core/byte_sizes.hpp"
#include "favor/core/resources.hpp"
#include "favor/runs/cost_model.hpp"

namespace favor::cli {

// One command: `setup` adds its arguments to its subcommand, bound to the command's own flag
// values; `run` runs it once the command line has parsed and returns the exit code.
struct Command {
    const char* name;
    const char* summary;
    void (*setup)(CLI::App& sub);
    int (*run)(const std::vector<std::string>& argv);   // argv: the whole command line
};

// The commands: the table main dispatches on, in the order `favor --help` and the messages
// about a missing or unknown command list them.
const std::vector<Command>& commands();

void setup_run(CLI::App& sub);
int run_run(const std::vector<std::string>& argv);
void setup_validate(CLI::App& sub);
int run_validate(const std::vector<std::string>& argv);
void setup_gen(CLI::App& sub);
int run_gen(const std::vector<std::string>& argv);
void setup_projection(CLI::App& sub);
int run_projection(const std::vector<std::string>& argv);
void setup_apply(CLI::App& sub);
int run_apply(const std::vector<std::string>& argv);
void setup_merge(CLI::App& sub);
int run_merge(const std::vector<std::string>& argv);
void setup_compare(CLI::App& sub);
int run_compare(const std::vector<std::string>& argv);
void setup_list(CLI::App& sub);
int run_list(const std::vector<std::string>& argv);

// A value flag as typed: nullopt when absent, the text (possibly empty) when given.
struct Text {
    std::string value;
    CLI::Option* opt = nullptr;
    std::optional<std::string> get() const {
        return opt && opt->count() > 0 ? std::optional<std::string>(value) : std::nullopt;
    }
    explicit operator bool() const { return opt && opt->count() > 0; }
    const std::string& operator*() const { return value; }
    const std::string* operator->() const { return &value; }
};
void bind(CLI::App& sub, Text& t, const std::string& name, const std::string& help);
// Several value flags in the order given (the order --help lists them).
struct FlagSpec {
    Text* text;
    const char* name;
    const char* help;
};
void bind(CLI::App& sub, std::initializer_list<FlagSpec> flags);

// "a, b, c".
std::string joined(const std::vector<std::string>& items);

// "favor: warning: MSG" on stderr, on one line.
void warn(const std::string& msg);

// The memory budget: --max-memory SIZE or what the system offers.
MemoryBudget budget_of(const std::string& cmd, const Text& max_memory);

// What main adds to "out of memory" when an allocation fails after the estimate let the
// request through: "estimated peak P<where>, budget B (source)".
void note_estimate(double peak, const MemoryBudget& budget, const std::string& where = "");
const std::string& estimate_note();

}  // namespace favor::cli
