#pragma once
// The error metrics of docs/design.md section 3 in one include: the metric table
// (metric_table.hpp), the output metrics it points at (output_metrics.hpp) and the streamed
// pairwise pass (pairwise_pass.hpp).
#include "favor/metric_table.hpp"
#include "favor/output_metrics.hpp"
#include "favor/pairwise_pass.hpp"
