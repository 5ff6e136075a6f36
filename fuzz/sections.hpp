#pragma once
// The fuzz targets' input format: files separated by lines "@@".
#include <string>
#include <vector>

inline std::vector<std::string> split_sections(const std::string& text) {
    std::vector<std::string> parts;
    const std::string sep = "\n@@\n";
    for (std::size_t pos = 0;;) {
        const std::size_t at = text.find(sep, pos);
        parts.push_back(text.substr(pos, at == std::string::npos ? std::string::npos : at - pos));
        if (at == std::string::npos) return parts;
        pos = at + sep.size();
    }
}
