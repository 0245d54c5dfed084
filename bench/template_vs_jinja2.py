#!/usr/bin/env python3
"""Benchmark: rendering a chat template, llmr's renderer against Python's jinja2 set up
exactly as Hugging Face transformers sets it up (_compile_jinja_template): an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the loop controls,
the {% generation %} block of its AssistantTracker (which renders its body), the
filter tojson (json.dumps with ensure_ascii=False by default) and the globals
raise_exception and strftime_now.  Each side compiles once and renders the context
RUNS times on one thread; the render figures are medians (jinja2's compile, timed
once, includes building the environment, as transformers does).  Also checks that
both renders are byte-identical (llmr's comes from `llmr template render`) and exits
1 when they are not, or when llmr cannot render (saying whether jinja2 can).  A
template that prints strftime_now with a fine-grained format may differ by the clock.

Usage: template_vs_jinja2.py LLMR TEMPLATE CONTEXT.json [RUNS]   (RUNS: default 2000)
"""
import json
import statistics
import subprocess
import sys
import time
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationBlock(jinja2.ext.Extension):
    """transformers' AssistantTracker without the tracking: {% generation %}...
    {% endgeneration %} is a call block whose method returns what its body renders."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [],
                                      body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def compile_like_transformers(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def run_llmr(args):
    """(exit code, stdout bytes, stderr text)"""
    proc = subprocess.run(args, capture_output=True)
    return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace").strip()


def render_failed(llmr_error, template, context):
    """llmr cannot render: says whether jinja2 can; there is nothing to time."""
    print(f"llmr template render failed: {llmr_error}")
    try:
        theirs = template.render(**context) if template else None
        print(f"jinja2 renders it ({len(theirs.encode('utf-8', 'surrogatepass'))} bytes)"
              if theirs is not None else "jinja2 does not compile it either")
    except Exception as e:  # any failure of the render is the answer here
        print(f"jinja2 fails too: {type(e).__name__}: {e}")
    return 1


def first_difference(a, b):
    n = min(len(a), len(b))
    i = next((k for k in range(n) if a[k] != b[k]), n)
    return (f"first difference at byte {i} of {len(a)} (llmr) / {len(b)} (jinja2):\n"
            f"  llmr:   {a[max(0, i - 40):i + 40]!r}\n  jinja2: {b[max(0, i - 40):i + 40]!r}")


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__.strip().splitlines()[-1])
    llmr, template_path, context_path = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
    files = ["--template", template_path, "--context", context_path]

    with open(template_path, encoding="utf-8") as f:
        source = f.read()
    with open(context_path, encoding="utf-8") as f:
        context = json.load(f)
    t0 = time.perf_counter_ns()
    try:
        template = compile_like_transformers(source)
    except jinja2.TemplateSyntaxError:
        template = None
    compile_us = (time.perf_counter_ns() - t0) / 1e3

    rc, our_render, error = run_llmr([llmr, "template", "render", *files])
    if rc != 0:
        return render_failed(error, template, context)
    rc, bench_out, error = run_llmr([llmr, "bench", "template", *files, "--runs", str(runs)])
    if rc != 0:
        sys.exit(f"llmr bench template failed (exit {rc}): {error}")
    ours = json.loads(bench_out)
    if template is None:
        template = compile_like_transformers(source)  # raises: jinja2 rejects what llmr took
    times = []
    rendered = ""
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        rendered = template.render(**context)
        times.append((time.perf_counter_ns() - t0) / 1e3)
    theirs = rendered.encode("utf-8", "surrogatepass")
    render_us = statistics.median(times)

    identical = our_render == theirs
    ratio = render_us / ours["render_us_median"] if ours["render_us_median"] > 0 else float("inf")
    print(f"template {template_path}, context {context_path}: {runs} renders each, medians, "
          f"one thread")
    print(f"{'renderer':16s} {'render µs':>12s} {'compile µs':>12s} {'output bytes':>13s}")
    print(f"{'llmr':16s} {ours['render_us_median']:12.2f} {ours['compile_us']:12.1f} "
          f"{len(our_render):13d}")
    print(f"{'jinja2 ' + jinja2.__version__:16s} {render_us:12.2f} {compile_us:12.1f} "
          f"{len(theirs):13d}")
    print(f"jinja2 / llmr (render): {ratio:.2f}x")
    print(f"renders byte-identical: {identical}")
    if not identical:
        print(first_difference(our_render, theirs))
    print(json.dumps({"template": template_path, "context": context_path, "runs": runs,
                      "llmr": ours, "jinja2_version": jinja2.__version__,
                      "jinja2_render_us_median": render_us, "jinja2_compile_us": compile_us,
                      "ratio_jinja2_over_llmr": ratio, "identical": identical}))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
