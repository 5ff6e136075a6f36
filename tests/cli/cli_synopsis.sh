#!/usr/bin/env bash
# The README's "Command line" synopsis (the one copy; docs/design.md section 4 points to it)
# names every command `favor --help` lists and exactly the flags each `favor COMMAND --help`
# lists, so the two cannot drift apart.
# Usage (ctest): cli_synopsis.sh FAVOR_BINARY SOURCE_DIR
set -uo pipefail
favor=$1 src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# The code block after "## Command line", cut into one chunk per command (lines from
# "favor COMMAND" up to the next "favor ..." line).
awk '/^## Command line/ {on = 1; next} on && /^```/ {n++; if (n == 2) exit; next} on && n == 1' \
  "$src/README.md" > "$tmp/synopsis"
[ -s "$tmp/synopsis" ] || { echo "FAIL: no synopsis block under '## Command line' in README.md" >&2; exit 1; }
chunk() { awk -v c="$1" '/^favor / {on = ($2 == c)} on' "$tmp/synopsis"; }
flags() { grep -oE -- '--[a-zA-Z][a-zA-Z-]*' | grep -vx -- '--help' | sort -u; }

commands=$("$favor" --help | awk '/^Subcommands:/ {on = 1; next} on && NF {print $1}')
[ -n "$commands" ] || fail "favor --help lists no subcommands"
for c in $commands; do
  chunk "$c" > "$tmp/chunk"
  [ -s "$tmp/chunk" ] || { fail "README synopsis has no 'favor $c' line"; continue; }
  "$favor" "$c" --help | grep -E '^ +(-[a-zA-Z],)?--' | flags > "$tmp/help_flags"
  flags < "$tmp/chunk" > "$tmp/readme_flags"
  missing=$(comm -23 "$tmp/help_flags" "$tmp/readme_flags" | tr '\n' ' ')
  extra=$(comm -13 "$tmp/help_flags" "$tmp/readme_flags" | tr '\n' ' ')
  [ -z "$missing" ] || fail "favor $c: README synopsis lacks $missing"
  [ -z "$extra" ] || fail "favor $c: README synopsis has $extra, which 'favor $c --help' does not list"
done
grep -q '^favor --version' "$tmp/synopsis" || fail "README synopsis has no 'favor --version' line"
[ "$fails" = 0 ] || exit 1
echo "ok: the README synopsis matches favor --help for: $(echo $commands)"
