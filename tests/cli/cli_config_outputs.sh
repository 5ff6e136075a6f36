#!/usr/bin/env bash
# Issue 36: a plain `favor run configs/X.json` never touches tracked files. Every shipped
# config's output directory, as validate resolves it (from the repository root and from
# another working directory), lies outside results/ and configs/; a config without
# output_dir writes out/<name> of the working directory. validate only reads (no run).
set -uo pipefail
favor=$1; src=$(cd "$2" && pwd -P)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect_lib.sh"   # fail
n=0
for c in "$src"/configs/*.json; do
  for wd in "$src" "$tmp"; do
    out=$(cd "$wd" && "$favor" validate "$c" --threads 1 --max-memory 1T 2>/dev/null) || { fail "validate $c (in $wd)"; continue; }
    dir=$(sed -n 's/^output directory: //p' <<<"$out")
    [ -n "$dir" ] || { fail "$c: validate printed no output directory"; continue; }
    case "$dir" in
      "$src"/results/*|"$src"/results/|"$src"/configs/*|"$src"/configs/) fail "$c writes into $dir (tracked)" ;;
    esac
    n=$((n + 1))
  done
done
[ "$n" -gt 40 ] || fail "only $n config resolutions checked"
# No output_dir: out/<name> of the working directory.
printf '{"name": "plain", "inputs": {"source": "random", "L": 8, "d": 4}, "variants": [{"features": "positive"}], "m": 4}\n' > "$tmp/p.json"
dir=$(cd "$tmp" && "$favor" validate p.json | sed -n 's/^output directory: //p')
[ "$dir" = "$(cd "$tmp" && pwd)/out/plain/" ] || fail "default output_dir resolved to '$dir'"
[ "$failures" = 0 ] || { echo "cli_config_outputs: $failures failure(s)" >&2; exit 1; }
echo "cli_config_outputs: ok ($n resolutions)"
