#!/usr/bin/python3
"""Plot a favor result directory (summary.csv or timing.csv, + run.json) as a PNG.

Usage: /usr/bin/python3 scripts/plot.py RESULT_DIR [--out PNG] [--data JSON]
           [--kind auto|m|L|scale|kernel|angle|timing|precision|gradient] [--metric output_mse]
           [--stat mean|median] [--x m|num_features] [--ratio] [--heads auto|facet|mean]
           [--layout auto|fig4|plain]

Kinds (auto picks from the table):
  kernel  kernel experiments (norm/angle columns): the Performer Fig. 2 heat map of
          r(phi, l) = MSE_trig / MSE_pos (closed form), the slice at the norm closest to 1
          (closed forms + empirical points, over the angles measured), and empirical / theory.
          Points are drawn at the angle they were measured at (variants at one angle are
          told apart by colour, marker and size, never shifted sideways); bars: ± one
          standard error of the mean.
  m       metric vs number of random features m (log-log), one line per variant, one panel
          per other varying key (scale, L, d), titled with the variants compared. When the
          variants are exactly trig and positive features, each iid and orthogonal, the
          Performer Fig. 4 layout: left "orthogonal vs iid" (per feature map), right
          "positive vs trig" (one projection); --layout fig4 forces it (variants outside it
          are named in the title), --layout plain refuses it. When run.json's config has a
          num_features grid (each variant at its own m), x is num_features.
  L       metric vs sequence length L (log x), one line per variant (and per m).
  scale   metric vs input scale (log y), one line per variant; panels per other keys.
  angle   kernel experiments, for comparing many estimators: kernel MSE vs angle (log y,
          ± one standard error of the mean), one line per variant at the angles measured,
          one panel per (m, norm), with the
          iid positive Lemma 2 curve for reference.
  timing  timing.csv (experiment "timing"): wall time vs L (log-log), exact attention and
          each FAVOR variant, median with min-max bars, the crossover L marked (the smallest
          L from which the variant stays faster than exact). The Performer Fig. 3 counterpart.
  precision  the half-precision study (scripts/precision_sweep.sh): RESULT_DIR holds
          breaks.csv (scripts/precision_report.py); one panel per feature map, one row per
          dtype (float16, bfloat16, float32) and stabiliser (max shift, none, the official
          epsilon), one column per input scale at the largest L, each cell coloured: fine,
          finite but > 10x float64's output_mse, NaN/Inf without overflow, overflow.
  gradient  the gradient metrics (a run with grad_* metrics) vs m (or num_features): one
          panel each for output_rel_error and grad_q/k/v_rel_error (mean over the trials,
          and over heads for per-head tables), uniform attention dashed grey (1 for dQ and
          dK: its gradient there is 0), and with grad_bias_rel a last panel of the bias
          (solid) against its Monte Carlo floor grad_bias_floor (dotted); one row of panels
          per other varying key (scale, L, d). A panel whose series go above 30 (relative
          errors of a blown-up ratio estimator) ends at 30 and names them. Never picked by auto.
auto: timing if the directory holds timing.csv and no summary.csv; kernel if the table is
a kernel table, else m if several m, else L if several L, else scale if several scales,
else m.

--stat mean (default): <metric>_mean with a band of ± one <metric>_std ("band: ± one std
of the trials", the spread, not the standard error of the mean). --stat median:
<metric>_median with a band from <metric>_p10 to <metric>_p90. --x num_features (--kind m
only): x is the number of feature columns (2m for trig and hyperbolic, m otherwise), to
compare at equal cost. A column baseline_<metric> (uniform attention on the same inputs) is
drawn as a dashed grey line in every panel. --ratio: the statistic and its band divided by
baseline_<metric> of the same row, uniform attention at 1 (the y label says what is divided
by what, and which side of 1 is better: below for the errors, above for grad_cosine). With input_seeds in the config the statistics are over the trials of every input
draw, and the band says so.

Per-head results (summary.csv with a head column, "per_head": true): --heads facet draws one
panel per head; --heads mean the mean over heads of each head's value (ratio with --ratio),
with a band from the lowest to the highest head and a note in the title; auto facets up to
8 heads (and 12 panels), else averages. A series never joins two rows at one x: a table
where it would (a key plot.py does not split on varies) exits 2.

Default output: beside the result set, not in it (favor run replaces RESULT_DIR whole):
<parent of RESULT_DIR>/<RESULT_DIR name>.png, suffixed with _<metric>, _median, _ratio,
_vs_num_features, _vs_<kind> (_timing for a timing table beside a summary) when a
non-default option is asked for; the path is printed. --data JSON also writes every series
drawn (kind, panel, label, variant, x, y, band edges lo/hi, band label) with the figure's
title, layout and y label, for tests/cli/plot_check.py. Exit 2 with one line on stderr on bad
input. Needs numpy and matplotlib (Debian python3-matplotlib): run it with /usr/bin/python3.

The code is the package scripts/favor_plot/, one module per figure kind (common, series,
approx, gradient, kernel, timing, precision; cli holds the command line).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from favor_plot.cli import main  # noqa: E402
# Names tests/cli/plot_check.py reads from this module (it loads plot.py in process).
from favor_plot.common import BASELINE_LABEL, CLIP_FACTOR, SEM_BAND, plt  # noqa: E402,F401
from favor_plot.series import HIGHER_IS_BETTER, ratio_label  # noqa: E402,F401

if __name__ == "__main__":
    sys.exit(main())
