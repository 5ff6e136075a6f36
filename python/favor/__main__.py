"""python3 -m favor study CAPTURE_DIR [options]: favor.study from the shell (docs/design.md 9.3);
python3 -m favor heads CAPTURE_DIR [--out DIR] [--period P]: favor.heads' census (9.5).
A bad capture or option, or a folder that cannot be written: one line on stderr, exit 2; Ctrl-C
or SIGTERM: one line, exit 130 / 143 (--out as it was), as `favor run`."""
import argparse
import sys

from . import Error, study


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m favor", description="favor's Python entry points")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("study", help="every head of a capture against the estimator families at equal budgets",
                       description=study.__doc__.split("\n")[0])
    s.add_argument("capture", metavar="CAPTURE_DIR", help="a capture of scripts/capture_qkv.py (manifest.json)")
    s.add_argument("--budgets", default="64,256", help="feature columns F, comma-separated (default 64,256)")
    s.add_argument("--grad", action="store_true", help="also the gradient metrics (the capture's g.npy where present)")
    s.add_argument("--causal", default="auto", choices=["auto", "yes", "no"],
                   help="auto: each layer as the model used it (default)")
    s.add_argument("--trials", type=int, default=None, help="trials per run (default: enough for the verdicts)")
    s.add_argument("--variants", default=None, metavar="CONFIG.json",
                   help="the variants of a favor config instead of the default families")
    s.add_argument("--threads", type=int, default=None, help="threads (default: favor's)")
    s.add_argument("--out", default=None, help="output folder (default out/study_<capture name>)")
    h = sub.add_parser("heads", help="a census of a capture's heads: local, sink, induction, retrieval",
                       description="favor.heads: per head the weight on the last 16/64/256 keys, the sink share, the row "
                                   "entropy, the induction and retrieval scores, and the kind they imply")
    h.add_argument("capture", metavar="CAPTURE_DIR", help="a capture (manifest.json; tokens.npy / targets.npy if present)")
    h.add_argument("--out", default=None, help="where heads.csv, heads.md, heads.png go (default: CAPTURE_DIR)")
    h.add_argument("--period", type=int, default=None,
                   help="the tokens repeat after P positions (a repeated-span probe; default: the manifest's "
                        "input.repeat_period, else the most recent earlier occurrence)")
    a = ap.parse_args(argv)
    if a.command == "heads":
        return _heads(a)
    try:
        path = study(a.capture, out=a.out, budgets=a.budgets, grad=a.grad, causal=a.causal, trials=a.trials, variants=a.variants,
                     threads=a.threads)
    except Error as e:
        print(f"favor study: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"favor study: {e or 'interrupted'}", file=sys.stderr)
        return 143 if "SIGTERM" in str(e) else 130
    print(path)
    return 0


def _heads(a):
    from . import heads
    try:
        rows = heads.write(a.capture, out=a.out, period=a.period)
    except Error as e:
        print(f"favor heads: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(heads.markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
