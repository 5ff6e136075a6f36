// The files a run reads (run_inputs.hpp).
#include "favor/experiments/run_inputs.hpp"

#include <filesystem>

#include "favor/io/tensor_file.hpp"

namespace favor {

std::vector<std::pair<std::string, std::string>> run_input_files(const Config& cfg) {
    std::vector<std::pair<std::string, std::string>> out;
    if (cfg.inputs.npy())
        for (const auto& [key, spec] : {std::pair{"q", &cfg.inputs.q}, {"k", &cfg.inputs.k}, {"v", &cfg.inputs.v}})
            out.emplace_back(std::string("inputs.") + key, parse_tensor_ref(*spec, key).path);
    if (!cfg.inputs.grad.empty()) out.emplace_back("inputs.grad", cfg.inputs.grad);
    if (cfg.kernel.pairs > 0) out.emplace_back("pairs.q", cfg.kernel.pairs_q), out.emplace_back("pairs.k", cfg.kernel.pairs_k);
    // Fitted maps' weights and their manifests (fitted_weights.hpp).
    for (std::size_t i = 0; i < cfg.variants.size(); ++i) {
        const Variant& v = cfg.variants[i];
        if (v.exact) continue;
        const nlohmann::json p = v.map->params();
        if (!p.contains("weights")) continue;
        const std::string file = parse_tensor_ref(p["weights"].get<std::string>(), "").path;
        const std::string field = "variants[" + std::to_string(i) + "].weights";
        out.emplace_back(field, file);
        out.emplace_back(field, std::filesystem::path(file).replace_extension(".json").string());
    }
    return out;
}

}  // namespace favor
