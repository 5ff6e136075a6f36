#include "favor/estimators/fitted_weights.hpp"

#include <cmath>
#include <filesystem>

#include <unistd.h>

#include "favor/core/error.hpp"
#include "favor/io/files.hpp"
#include "favor/io/json_text.hpp"
#include "favor/io/tensor_file.hpp"

namespace favor {

namespace {
// A manifest is a few kB (loss curves per head); far above any real one.
constexpr std::size_t kMaxManifestBytes = std::size_t(16) << 20;

// "layer0.head1" -> ("layer0", 1); anything else -> (spec, none).
std::pair<std::string, std::optional<std::size_t>> split_head(const std::string& member) {
    const std::size_t dot = member.rfind(".head");
    if (dot == std::string::npos || dot + 5 == member.size()) return {member, std::nullopt};
    const std::string digits = member.substr(dot + 5);
    if (digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return {member, std::nullopt};
    return {member.substr(0, dot), std::stoul(digits)};
}

NpyArray read_part(const TensorRef& file, const std::string& name, const Field& where) {
    try {
        return read_tensor(TensorRef{file.path, name});
    } catch (const Error& e) {
        where.fail(e.what());
    }
}
}  // namespace

std::shared_ptr<const FittedWeights> load_fitted_weights(const std::string& ref, const std::string& kind,
                                                         const Field& where) {
    const TensorRef file = parse_tensor_ref(ref, "");
    if (file.member.empty() || tensor_format(file.path) == TensorFormat::npy)
        where.fail("'" + ref + "': give FILE.npz:LAYER or FILE.npz:LAYER.headN (scripts/fit_maps.py writes them)");
    auto w = std::make_shared<FittedWeights>();
    w->ref = ref;
    const auto [layer, head] = split_head(file.member);
    w->head = head;
    // The weights file itself first: a missing .npz is named as such, not as its missing manifest.
    try {
        ::close(open_regular_file(file.path, "fitted-weights file").fd);
    } catch (const Error& e) {
        where.fail(e.what());
    }
    // The manifest beside the file: the kind of map, and the capture each layer was fitted on.
    const std::string manifest_path = std::filesystem::path(file.path).replace_extension(".json").string();
    nlohmann::json manifest;
    try {
        manifest = parse_json_text(read_regular_file(manifest_path, "fitted-weights manifest", kMaxManifestBytes),
                                   manifest_path);
    } catch (const Error& e) {
        where.fail(e.what());
    }
    if (!manifest.is_object() || !manifest.contains("kind") || !manifest["kind"].is_string())
        where.fail(manifest_path + ": no \"kind\" (a manifest of scripts/fit_maps.py names the map: hedgehog or t2r)");
    w->kind = manifest["kind"].get<std::string>();
    if (w->kind != kind)
        where.fail("'" + ref + "' holds " + w->kind + " weights (" + manifest_path + "), not " + kind + "'s");
    const nlohmann::json layers = manifest.value("layers", nlohmann::json::object());
    if (!layers.is_object() || !layers.contains(layer))
        where.fail(manifest_path + ": no layer '" + layer + "' (the layers are its \"layers\" keys)");
    const nlohmann::json& on = layers[layer].value("fitted_on", nlohmann::json());
    if (on.is_object() && on.contains("q_sha256") && on["q_sha256"].is_string())
        w->fitted_on_q_sha256 = on["q_sha256"].get<std::string>();
    for (int s = 0; s < 2; ++s) {
        const std::string side = s == 0 ? "q" : "k";
        const NpyArray A = read_part(file, layer + "." + side + "_A", where);
        const NpyArray b = read_part(file, layer + "." + side + "_b", where);
        const std::string a_name = file.path + ":" + layer + "." + side + "_A";
        if (A.shape.size() != 3 || b.shape.size() != 2 || b.shape[0] != A.shape[0] || b.shape[1] != A.shape[2] ||
            A.shape[0] == 0 || A.shape[1] == 0 || A.shape[2] == 0)
            where.fail(a_name + ": A must be (heads, d, w) and b (heads, w) with heads, d, w >= 1");
        if (s == 1 && (A.shape[0] != w->heads || A.shape[1] != w->d || A.shape[2] != w->width))
            where.fail(a_name + ": the keys' A has another shape than the queries'");
        w->heads = A.shape[0], w->d = A.shape[1], w->width = A.shape[2];
        for (const NpyArray* p : {&A, &b})
            for (double x : p->data)
                if (!std::isfinite(x)) where.fail(a_name + ": a weight is not finite");
        w->A[s] = A.data, w->b[s] = b.data;
    }
    if (head && *head >= w->heads)
        where.fail("'" + ref + "': head " + std::to_string(*head) + " asked, the file holds " +
                   std::to_string(w->heads) + " (head0..head" + std::to_string(w->heads - 1) + ")");
    return w;
}

}  // namespace favor
