#pragma once
// NPY files (numpy's .npy format, versions 1.0, 2.0 and 3.0): a hardened reader for float16 /
// float32 / float64 arrays in either byte order and either memory order (and bfloat16: '<V2',
// '|V2', 'bfloat16'), and an atomic writer. .npz and .safetensors: tensor_file.hpp.
// Every malformed or unsupported input throws favor::Error with a one-line message that
// starts with the file name, e.g. "q.npy: truncated data (expected 4096 bytes, found 100)".
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace favor {

struct NpyArray {
    std::vector<std::size_t> shape;   // as in the file; empty for a 0-d array
    std::vector<double> data;         // C (row-major) order, converted to double
    std::string dtype;                // descr as read ("<f4", ">f2", "<V2", ...); safetensors: "F32", "BF16", ...
};

// Upper bound on the number of elements of an array the reader accepts (2^33, 64 GiB as double).
inline constexpr std::size_t kNpyMaxElements = std::size_t(1) << 33;

// The header of a .npy file: shape and dtype, checked as read_npy checks them (regular file,
// magic, version, header syntax, dtype, and a data size that matches the file size), without
// reading the data.
struct NpyHeader {
    std::vector<std::size_t> shape;
    std::string dtype;
};
NpyHeader read_npy_header(const std::string& path);

// Reads a .npy file (a regular file only: FIFOs and devices are refused before any read). The data size must match the header exactly (truncated or trailing data
// are errors); fortran_order True is transposed to C order. NaN / inf are not checked here.
NpyArray read_npy(const std::string& path);

// Parses a whole .npy image from memory; `name` starts every error message.
NpyArray parse_npy(const std::string& name, const char* bytes, std::size_t size);

// Index of the first NaN or +-inf entry (C order), if any.
std::optional<std::size_t> first_nonfinite(const NpyArray& a);

// "(2, 3)", "(5,)": a shape as numpy prints it.
std::string shape_str(const std::vector<std::size_t>& shape);

// Writes little-endian, C order, version 1.0 (2.0 if the header needs it), as "<f4" or "<f8".
// Atomic (write_file_atomic in files.hpp): on failure throws favor::Error naming `path`. `data` holds prod(shape) values in C order.
void write_npy(const std::string& path, const std::vector<std::size_t>& shape,
               const double* data, bool as_float32);
// The bytes write_npy writes (errors name `path`), for a set of files written together.
std::string npy_bytes(const std::string& path, const std::vector<std::size_t>& shape, const double* data,
                      bool as_float32);

}  // namespace favor
