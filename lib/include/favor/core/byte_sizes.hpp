#pragma once
// Byte counts as text (docs/limits.md): "1.5 GiB" for messages, and size flags such as
// --max-memory 8G read back into bytes.
#include <cstddef>
#include <string>

namespace favor {

constexpr double kMiB = 1024.0 * 1024.0;

// "1.5 GiB", "980 MiB", "12 KiB", "512 B".
std::string format_bytes(double bytes);
// A size flag: bytes, or a number with K, M, G, T (powers of 1024; "B" / "iB" may follow),
// e.g. "8G", "512MiB", "1.5GB". Errors name `flag`.
std::size_t parse_size_text(const std::string& flag, const std::string& text);

}  // namespace favor
