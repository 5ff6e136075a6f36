// favor: the command-line driver. It only parses flags and dispatches to a command of the
// table below (each in app/*_commands.cpp, calling the library); the math lives in lib/.
// Exit codes: 0 success, 2 bad input, 1 internal failure, 3 `apply` wrote an output with
// non-finite entries, 130/143 a run stopped by SIGINT/SIGTERM.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "command.hpp"
#include "favor/core/byte_sizes.hpp"
#include "favor/core/error.hpp"
#include "favor/core/names.hpp"
#include "favor/core/process.hpp"
#include "favor/core/resources.hpp"
#include "favor/experiments/experiment.hpp"
#include "favor/runs/cost_model.hpp"

namespace favor::cli {

const std::vector<Command>& commands() {
    static const std::vector<Command> table = {
        {"run", "run an experiment config and write its tables", setup_run, run_run},
        {"validate", "check a config (and its .npy inputs), print the resolved grid and the cost estimate",
         setup_validate, run_validate},
        {"gen", "write the random q.npy, k.npy, v.npy a run uses", setup_gen, run_gen},
        {"projection", "write the random matrix W (m, d) a run draws", setup_projection, run_projection},
        {"apply", "exact or approximate attention of given .npy tensors", setup_apply, run_apply},
        {"merge", "combine result directories (shards, sweep runs) into one result set", setup_merge, run_merge},
        {"compare",
         "per cell, test every pair of variants of an approximation result and rank them; writes "
         "DIR/comparisons_<metric>.csv and DIR/ranking_<metric>.csv",
         setup_compare, run_compare},
        {"list", "feature maps, projections, metrics, experiment kinds", setup_list, run_list},
    };
    return table;
}

}  // namespace favor::cli

namespace {

using favor::Error;
using favor::cli::commands;

// The command names, in the order of the table.
std::vector<std::string> command_names() {
    std::vector<std::string> n;
    for (const auto& c : commands()) n.push_back(c.name);
    return n;
}

// What main returns after a command that printed: 2 with one line if stdout lost some of it.
int checked_exit(int rc) {
    try {
        favor::check_stdout();
    } catch (const Error& e) {
        std::cerr << "favor: " << e.what() << "\n";
        return 2;
    }
    return rc;
}

// The command first: a missing or misspelt one gets a "did you mean"; --version. Returns the
// exit code when the line is settled here, -1 to go on parsing.
int check_command_word(int argc, char** argv) {
    const std::vector<std::string> names = command_names();
    if (argc < 2) {
        std::cerr << "favor: missing command (one of " << favor::cli::joined(names) << "; favor --help)\n";
        return 2;
    }
    const std::string first = argv[1];
    if (first == "--version" || first == "-V") {
        std::cout << favor::version_text() << "\n";
        return checked_exit(0);
    }
    if (first.empty() || (first[0] != '-' && std::find(names.begin(), names.end(), first) == names.end())) {
        const std::string guess = favor::closest_name(first, names);
        std::cerr << "favor: " << favor::one_line("unknown command '" + first + "'")
                  << (guess.empty() ? "; commands: " + favor::cli::joined(names) : ", did you mean '" + guess + "'?")
                  << "\n";
        return 2;
    }
    return -1;
}

// "run: unknown flag '--tirals', did you mean '--trials'?" for the first "--name" argument the
// chosen command has no flag for (the suggestion from lib/src/core/names.cpp, as for config keys
// and commands); "" when every one is known. After "--" arguments are operands.
std::string unknown_flag(int argc, char** argv, const std::string& cmd, const CLI::App& sub) {
    std::vector<std::string> flags;
    for (const CLI::Option* o : sub.get_options()) {
        for (const auto& n : o->get_lnames()) flags.push_back("--" + n);
        for (const auto& n : o->get_snames()) flags.push_back("-" + n);
    }
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") break;
        if (a.size() < 3 || a.compare(0, 2, "--") != 0) continue;
        const std::string name = a.substr(0, a.find('='));
        if (std::find(flags.begin(), flags.end(), name) != flags.end()) continue;
        const std::string guess = favor::closest_name(name, flags);
        return cmd + ": unknown flag '" + name + "'" +
               (guess.empty() ? "; favor " + cmd + " --help lists its flags" : ", did you mean '" + guess + "'?");
    }
    return "";
}

// Runs the chosen command; every failure becomes one line on stderr and its exit code.
int dispatch(const std::vector<std::pair<const favor::cli::Command*, CLI::App*>>& subs, int argc, char** argv) {
    try {
        favor::check_arguments_utf8(argc, argv);
        const std::vector<std::string> line(argv, argv + argc);
        for (const auto& [cmd, sub] : subs)
            if (*sub) return checked_exit(cmd->run(line));
    } catch (const Error& e) {
        // One line, whatever a message quotes (a name from a file may hold a newline).
        std::string msg = e.what();
        for (char& c : msg)
            if (static_cast<unsigned char>(c) < 0x20) c = ' ';
        std::cerr << "favor: " << msg << "\n";
        return 2;
    } catch (const std::bad_alloc&) {
        const std::string& est = favor::cli::estimate_note();
        std::cerr << "favor: out of memory" << (est.empty() ? "" : " (" + est + ")")
                  << "; lower L, m or --threads, or give --max-memory below what this machine has\n";
        return 1;
    } catch (const std::length_error&) {
        const std::string& est = favor::cli::estimate_note();
        std::cerr << "favor: out of memory: a buffer larger than the address space was requested"
                  << (est.empty() ? "" : " (" + est + ")") << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "favor: internal error: " << favor::one_line(e.what()) << "\n";
        return 1;
    }
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    favor::prepare_process(argv);
    favor::use_predictable_allocator();
    if (const int rc = check_command_word(argc, argv); rc >= 0) return rc;

    CLI::App app{"favor: random-feature approximations of softmax attention (Performer, FAVOR+)"};
    app.require_subcommand(1);
    app.set_version_flag("--version", favor::version_text());
    std::vector<std::pair<const favor::cli::Command*, CLI::App*>> subs;
    for (const auto& cmd : commands()) {
        CLI::App* sub = app.add_subcommand(cmd.name, cmd.summary);
        cmd.setup(*sub);
        subs.emplace_back(&cmd, sub);
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return checked_exit(app.exit(e));
        std::string msg;
        for (const auto& [cmd, sub] : subs)
            if (argv[1] == std::string(cmd->name)) msg = unknown_flag(argc, argv, cmd->name, *sub);
        std::cerr << "favor: " << favor::one_line(msg.empty() ? e.what() : msg) << "\n";
        return 2;
    }
    return dispatch(subs, argc, argv);
}
