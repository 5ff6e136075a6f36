#pragma once
// The process around a command (docs/limits.md, "The process"): what favor sets up before it
// parses anything, and the check of stdout before it exits.
#include <string>

namespace favor {

// Before anything else in main: OpenBLAS single-threaded from its start (re-executes the
// program once with OPENBLAS_NUM_THREADS=1 when that is unset: the library starts its thread
// pool when it is loaded, and under `ulimit -v` of 60-200 MB that pool spins on its buffer
// and exit waits for it forever; favor runs the BLAS single-threaded anyway); /dev/null on
// each of fds 0, 1, 2 that is closed (so no file favor opens becomes stdout or stderr, and
// the stop message never lands in a journal); SIGXFSZ ignored (a write beyond `ulimit -f`
// then fails with EFBIG, which every writer reports, instead of killing without a word).
void prepare_process(char** argv);

// Error naming the argument if a command-line argument is not valid UTF-8 (names and values
// are recorded in run.json and journals, which hold UTF-8 only). `argv[0]` is not checked.
void check_arguments_utf8(int argc, char** argv);

// Flushes stdout; Error "stdout: write error (...)" if anything written to it was lost
// (`favor list > /dev/full`).
void check_stdout();

}  // namespace favor
