# Shared by the CLI tests that check refusals (source it after setting $favor):
#   fail MESSAGE                       counts a failure (report with $failures at the end)
#   expect RC NAME EXPECTED ARGS...    favor ARGS exits RC within $EXPECT_TIMEOUT s (default 60)
#                                      with exactly one stderr line, which contains EXPECTED
#                                      (a fixed string)
failures=0
expect_timeout=${EXPECT_TIMEOUT:-60}
fail() { echo "FAIL $*" >&2; failures=$((failures + 1)); }
expect() {
  local want=$1 name=$2 expected=$3; shift 3
  local err rc lines
  err=$(timeout "$expect_timeout" "$favor" "$@" 2>&1 >/dev/null); rc=$?
  lines=$(printf '%s' "$err" | grep -c '^' || true)
  if [ "$rc" -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$expected" <<<"$err"; then
    fail "$name: rc=$rc (want $want) lines=$lines stderr=[$err] expected [$expected]"
  fi
}
