# Shared by the shell tests: sourced after the test has made its scratch directory
# $tmp.  expect runs a command keeping stdout/stderr in $out/$err and checks its exit
# code; has checks that a string holds another; finish_checks prints the verdict and
# exits 1 when any check failed.
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# expect CODE DESCRIPTION -- COMMAND...
expect() {
  local want=$1 what=$2; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
  [[ $got -eq $want ]] || fail "$what: exit $got, wanted $want; stderr: $err"
}
has() { [[ "$1" == *"$2"* ]] || fail "$3: no \"$2\" in: $1"; }
# finish_checks WHAT
finish_checks() {
  if [[ $failures -gt 0 ]]; then
    echo "$failures $1 checks failed" >&2
    exit 1
  fi
  echo "all $1 checks passed"
  exit 0
}
