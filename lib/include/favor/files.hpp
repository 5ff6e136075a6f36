#pragma once
// Writing result files: atomic replacement (temporary file, fsync, rename), so a failed run
// never leaves a partial or corrupt file and earlier results stay intact, and the checks
// on an output directory made before any work starts.
#include <string>

namespace favor {

// Writes `content` to `path` through "<path>.tmp.<pid>", fsync and rename; throws Error
// naming the path on failure and leaves no temporary file behind.
void write_file_atomic(const std::string& path, const std::string& content);

// Makes sure `dir` can receive results (it is a directory or can be created as one, and is
// writable) without creating anything; throws Error naming it otherwise.
void check_output_dir(const std::string& dir);
// Creates `dir` (and parents) if missing.
void make_output_dir(const std::string& dir);

}  // namespace favor
