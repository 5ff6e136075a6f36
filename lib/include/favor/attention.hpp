#pragma once
// Attention, exact and estimated (docs/design.md section 2), for callers that use several
// kinds: exact attention, linear attention from feature matrices, the whole FAVOR estimator
// (unfused and fused), and the block sizes they share. Each has its own header below.
#include "favor/attention_blocks.hpp"
#include "favor/exact_attention.hpp"
#include "favor/favor_forward.hpp"
#include "favor/linear_attention.hpp"
