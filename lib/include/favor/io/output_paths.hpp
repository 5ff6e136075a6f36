#pragma once
// The files one command reads and writes must all be different files: an output that is also
// an input (`apply --grad G.npy --out G.npy`) would be computed against, or replace, what it
// read (design.md section 4, "apply"). Compared by what the paths name, not their text.
#include <string>
#include <vector>

namespace favor {

// A path and what names it in messages ("--out", "--grad", "dq output").
struct NamedPath {
    std::string path;
    std::string role;
};

// Whether a and b name the same file: the same (device, inode) when both exist (symbolic
// links followed, hard links found), else the same canonical absolute path (links in the
// existing part resolved, `.` and `..` removed).
bool same_file(const std::string& a, const std::string& b);

// Throws Error "<cmd>: <role> <path> is the same file as <role> <path>; every output must
// differ from every input and from the other outputs" when an output is the same file as an
// input or as another output. Call before any work.
void check_distinct_files(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs,
                          const std::string& cmd);

}  // namespace favor
