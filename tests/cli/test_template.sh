#!/usr/bin/env bash
# `llmr template render` end to end: the render reaches stdout byte for byte (no
# newline added), every failure (a missing file, bad JSON, a context that is not an
# object, a template that does not compile, raise_exception) exits 1 with a message on
# stderr and nothing on stdout, usage errors exit 2, --help works; plus a short
# `llmr bench template`.
# Usage: test_template.sh PATH_TO_LLMR
set -u
LLMR=${1:?usage: test_template.sh PATH_TO_LLMR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmr-template-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

# same_bytes DESCRIPTION: stdout of the last `expect` equals $tmp/want byte for byte.
same_bytes() {
  cmp -s "$tmp/out" "$tmp/want" ||
    fail "$1: stdout differs; got: $(od -c "$tmp/out" | head -5); wanted: $(od -c "$tmp/want" | head -5)"
}
# quiet_failure DESCRIPTION: the last `expect` wrote nothing on stdout, something on stderr.
quiet_failure() {
  [[ ! -s "$tmp/out" ]] || fail "$1: wrote to stdout: $out"
  [[ -n "$err" ]] || fail "$1: no message on stderr"
}
render() { "$LLMR" template render "$@"; }

# Exact bytes: no trailing newline is added ...
printf 'Hello {{ name }}!' >"$tmp/hello.jinja"
printf '{"name": "world"}' >"$tmp/hello.json"
expect 0 "render without a final newline" -- render --template "$tmp/hello.jinja" --context "$tmp/hello.json"
printf 'Hello world!' >"$tmp/want"
same_bytes "render without a final newline"
[[ -z "$err" ]] || fail "a good render wrote to stderr: $err"

# ... and a template's own newlines are kept (trim_blocks drops the one after a tag).
printf '{%% for m in messages %%}\n<{{ m.role }}>{{ m.content }}\n{%% endfor %%}\n' >"$tmp/loop.jinja"
printf '{"messages": [{"role": "user", "content": "h\\u00e9"}, {"role": "assistant", "content": "yo"}]}' \
  >"$tmp/loop.json"
expect 0 "render with newlines" -- render --template "$tmp/loop.jinja" --context "$tmp/loop.json"
printf '<user>h\xc3\xa9\n<assistant>yo\n' >"$tmp/want"
same_bytes "render with newlines and UTF-8"

# An empty render is empty output, and a success.
printf '{%% if missing %%}x{%% endif %%}' >"$tmp/empty.jinja"
expect 0 "empty render" -- render --template "$tmp/empty.jinja" --context "$tmp/hello.json"
: >"$tmp/want"
same_bytes "empty render"

# The built-in template (ChatML-like).
printf '{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}' >"$tmp/chat.json"
expect 0 "render --default" -- render --default --context "$tmp/chat.json"
printf '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n' >"$tmp/want"
same_bytes "render --default"

# Failures: exit 1, a message naming the file, nothing on stdout.
expect 1 "missing template" -- render --template "$tmp/nope.jinja" --context "$tmp/hello.json"
quiet_failure "missing template"
has "$err" "nope.jinja" "missing template named"
expect 1 "missing context" -- render --template "$tmp/hello.jinja" --context "$tmp/nope.json"
quiet_failure "missing context"
has "$err" "nope.json" "missing context named"
printf '{"name": "world",' >"$tmp/bad.json"
expect 1 "malformed context" -- render --template "$tmp/hello.jinja" --context "$tmp/bad.json"
quiet_failure "malformed context"
has "$err" "bad.json" "malformed context named"
printf '["not", "an", "object"]' >"$tmp/array.json"
expect 1 "context not an object" -- render --template "$tmp/hello.jinja" --context "$tmp/array.json"
quiet_failure "context not an object"
has "$err" "JSON object" "context not an object message"
printf 'a {%% if %%} b' >"$tmp/broken.jinja"
expect 1 "template that does not compile" -- render --template "$tmp/broken.jinja" --context "$tmp/hello.json"
quiet_failure "template that does not compile"
has "$err" "broken.jinja" "compile error names the template"
printf 'before {{ raise_exception("boom") }} after' >"$tmp/raise.jinja"
expect 1 "raise_exception" -- render --template "$tmp/raise.jinja" --context "$tmp/hello.json"
quiet_failure "raise_exception"
has "$err" "boom" "raise_exception message"

# --now fixes strftime_now's clock; a time that is not one is a usage error.
printf '{{ strftime_now("%%Y-%%m-%%d %%H:%%M") }}' >"$tmp/date.jinja"
expect 0 "render --now" -- render --template "$tmp/date.jinja" --context "$tmp/hello.json" --now "2026-01-15 09:30:00"
printf '2026-01-15 09:30' >"$tmp/want"
same_bytes "render --now"
expect 2 "bad --now" -- render --template "$tmp/date.jinja" --context "$tmp/hello.json" --now "2026-13-40 99:00:00"
has "$err" "--now" "bad --now message"

# Usage errors: exit 2.
expect 2 "no subcommand" -- "$LLMR" template
expect 2 "unknown subcommand" -- "$LLMR" template draw
expect 2 "no context" -- render --template "$tmp/hello.jinja"
has "$err" "--context" "no context message"
expect 2 "no template" -- render --context "$tmp/hello.json"
expect 2 "template and default" -- render --default --template "$tmp/hello.jinja" --context "$tmp/hello.json"
expect 2 "unexpected argument" -- render --template "$tmp/hello.jinja" --context "$tmp/hello.json" extra
expect 2 "option without a value" -- render --context "$tmp/hello.json" --template

# Help.
expect 0 "template --help" -- "$LLMR" template --help
has "$out" "--context" "template help"
expect 0 "template render --help" -- "$LLMR" template render --help
has "$out" "usage: llmr template render" "template render help"
expect 0 "help template" -- "$LLMR" help template
has "$out" "--default" "help template"
expect 0 "help lists template" -- "$LLMR" help
has "$out" "template" "help lists template"

# The benchmark, briefly.
expect 0 "bench template" -- "$LLMR" bench template --template "$tmp/loop.jinja" --context "$tmp/loop.json" --runs 5
has "$out" '"render_us_median": ' "bench template JSON"
has "$out" '"output_bytes": 24' "bench template output bytes"
expect 1 "bench template render error" -- "$LLMR" bench template --template "$tmp/raise.jinja" --context "$tmp/hello.json" --runs 5
has "$err" "boom" "bench template render error"
expect 2 "bench template bad runs" -- "$LLMR" bench template --default --context "$tmp/chat.json" --runs 0

finish_checks template
