#pragma once
// The one error type for bad user input (config, arguments, files). `main` catches it,
// prints its message as one line on stderr and exits 2. Internal invariants use assert.
#include <cstdio>
#include <stdexcept>
#include <string>

namespace favor {

// `s` with control characters escaped (\n, \r, \t, others as \xNN), so text quoted from
// user input (a name with a newline, an escape sequence) keeps a message on one line.
inline std::string one_line(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x20 && c != 0x7f) {
            out += ch;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        }
    }
    return out;
}

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(one_line(what)) {}
};

}  // namespace favor
