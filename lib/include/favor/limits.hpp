#pragma once
// The limits of docs/limits.md in one include for the CLI: what a request costs
// (cost_model.hpp), what the machine offers it (resources.hpp), and byte sizes as text
// (byte_sizes.hpp).
#include "favor/byte_sizes.hpp"
#include "favor/cost_model.hpp"
#include "favor/resources.hpp"
