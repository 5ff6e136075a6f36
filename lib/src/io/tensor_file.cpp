// Tensor files (tensor_file.hpp): the format by extension, "PATH:MEMBER" references, and the
// dispatch to the .npy, .npz and .safetensors readers.
#include "favor/io/tensor_file.hpp"

#include "io/npy_header.hpp"

namespace favor {

namespace {
bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

TensorFormat tensor_format(const std::string& path) {
    if (ends_with(path, ".npz")) return TensorFormat::npz;
    if (ends_with(path, ".safetensors")) return TensorFormat::safetensors;
    return TensorFormat::npy;
}

TensorRef parse_tensor_ref(const std::string& spec, const std::string& default_member) {
    // The path ends at the first ':' that follows ".npz" or ".safetensors"; the name is the
    // rest, whole, so a name may hold ':' (design.md section 5, "Tensor files").
    for (std::size_t colon = spec.find(':'); colon != std::string::npos; colon = spec.find(':', colon + 1))
        if (tensor_format(spec.substr(0, colon)) != TensorFormat::npy) return {spec.substr(0, colon), spec.substr(colon + 1)};
    if (tensor_format(spec) == TensorFormat::npy) return {spec, ""};
    return {spec, default_member};
}

namespace {
NpyArray read_any(const TensorRef& r, bool header_only) {
    switch (tensor_format(r.path)) {
        case TensorFormat::npz:
            if (r.member.empty()) npy::fail(r.path, "no array named (write PATH:NAME)");
            return npy::read_npz(r.path, r.member, header_only);
        case TensorFormat::safetensors:
            if (r.member.empty()) npy::fail(r.path, "no tensor named (write PATH:NAME)");
            return npy::read_safetensors(r.path, r.member, header_only);
        case TensorFormat::npy: break;
    }
    if (header_only) {
        NpyHeader h = read_npy_header(r.path);
        NpyArray a;
        a.shape = std::move(h.shape);
        a.dtype = std::move(h.dtype);
        return a;
    }
    return read_npy(r.path);
}
}  // namespace

NpyArray read_tensor(const TensorRef& r) { return read_any(r, false); }

NpyHeader read_tensor_header(const TensorRef& r) {
    NpyArray a = read_any(r, true);
    return {std::move(a.shape), std::move(a.dtype)};
}

}  // namespace favor
