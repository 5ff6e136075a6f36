#pragma once
// The one error type for bad user input (config, arguments, files). `main` catches it,
// prints its message as one line on stderr and exits 2. Internal invariants use assert.
#include <stdexcept>
#include <string>

namespace favor {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace favor
