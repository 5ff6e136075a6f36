#pragma once
// Tensors in the files researchers keep them in (docs/design.md section 5, "Tensor files"): a
// .npy file, an array of a .npz archive (numpy.savez or savez_compressed) or a tensor of a
// .safetensors file, each read into an NpyArray (C order, converted to double exactly) with
// the strictness of the .npy reader: every length, offset and size checked against the file
// before it is used. Errors are favor::Error with one line that starts with the file name
// ("qkv.npz: ..."), or "file:member: ..." for what is wrong inside one array.
#include <cstddef>
#include <string>
#include <vector>

#include "favor/io/npy.hpp"

namespace favor {

enum class TensorFormat { npy, npz, safetensors };
// By the extension: ".npz", ".safetensors"; anything else is read as .npy.
TensorFormat tensor_format(const std::string& path);

// One tensor: a file, and for .npz / .safetensors the name of the array in it.
struct TensorRef {
    std::string path;
    std::string member;   // empty for .npy
    std::string name() const { return member.empty() ? path : path + ":" + member; }
};
// "PATH" or "PATH:MEMBER" (a member only after a path ending in .npz or .safetensors; a .npz
// member is the name given to numpy.savez, without ".npy"). PATH ends at the first ':' after
// ".npz" or ".safetensors" and MEMBER is the rest, ':' included ("m.safetensors:blk:0.q" is
// tensor "blk:0.q"). Without one, `default_member` (the config key: q, k or v).
TensorRef parse_tensor_ref(const std::string& spec, const std::string& default_member);

// The array (shape, values) and its header only (shape, dtype; the data size checked).
NpyArray read_tensor(const TensorRef& ref);
NpyHeader read_tensor_header(const TensorRef& ref);

// Upper bounds of the containers (far above real files: numpy writes 3 members, a model
// checkpoint's safetensors header is a few hundred kB; the format's own limit is 100 MB).
inline constexpr std::size_t kNpzMaxMembers = 65536;
inline constexpr std::size_t kNpzMaxDirectoryBytes = std::size_t(64) << 20;
inline constexpr std::size_t kSafetensorsMaxHeaderBytes = std::size_t(100) << 20;

// In memory (the fuzz targets, tests): the names in an image, and one array of it.
std::vector<std::string> npz_members(const std::string& name, const char* bytes, std::size_t size);
NpyArray parse_npz(const std::string& name, const char* bytes, std::size_t size, const std::string& member);
std::vector<std::string> safetensors_names(const std::string& name, const char* bytes, std::size_t size);
NpyArray parse_safetensors(const std::string& name, const char* bytes, std::size_t size, const std::string& member);

}  // namespace favor
