#include "favor/core/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "favor/core/blas.hpp"
#include "favor/core/error.hpp"
#include "favor/core/names.hpp"

namespace favor {

void prepare_process(char** argv) {
    for (int fd = 0; fd <= 2; ++fd)
        if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            const int got = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);   // the lowest free fd: this one
            if (got >= 0 && got != fd) ::close(got);
        }
    ::signal(SIGXFSZ, SIG_IGN);
    start_blas_single_threaded(argv);
}

void check_arguments_utf8(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string problem = utf8_problem(argv[i]);
        if (problem.empty()) continue;
        std::string a;   // as typed, bytes beyond ASCII as \xNN
        for (const char* c = argv[i]; *c; ++c) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(*c));
            a += static_cast<unsigned char>(*c) < 0x80 ? std::string(1, *c) : std::string(hex);
        }
        std::string flag;   // the flag this value belongs to, for the message
        if (i > 1 && argv[i - 1][0] == '-') flag = std::string(" (the value of ") + argv[i - 1] + ")";
        throw Error("argument " + std::to_string(i) + " '" + a + "'" + flag + ": not valid UTF-8 (" + problem +
                    "); favor records names and values in run.json, which holds UTF-8 only: rename it");
    }
}

void check_stdout() {
    std::cout.flush();
    const bool lost = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
    const int err = errno;
    if (lost) throw Error(std::string("stdout: write error (") + std::strerror(err ? err : EIO) + ")");
}

}  // namespace favor
