#!/usr/bin/env python3
"""Where a serve run's time went, from the step loop's trace (LLMR_STEP_TRACE, see
engines/gpt_oss/step_trace.h): steps that only decode against steps that also read
prompts, their mean time by decode rows, the gaps between steps (the loop's own work:
plan, events, waiting for requests), and the time spent with fewer decoders than the run's
most (its tail).

A trace of several runs one after another (the levels of `llmr bench serve`) is cut
where the loop was idle for --gap-ms or more, and each part summed up alone.

Usage: step_trace_summary.py TRACE [--gap-ms 20] [--min-steps 50]"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--gap-ms", type=float, default=20.0, help="idle time that ends a part")
    ap.add_argument("--min-steps", type=int, default=50, help="parts of fewer steps are skipped")
    a = ap.parse_args()
    steps = []
    with open(a.trace) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            start, items, dec, tokens, waiting, running, us = map(int, line.split())
            steps.append((start, items, dec, tokens, waiting, running, us))
    if not steps:
        sys.exit("no steps in the trace")
    parts, first = [], 0
    for i in range(1, len(steps) + 1):
        if i == len(steps) or steps[i][0] - (steps[i - 1][0] + steps[i - 1][6]) >= a.gap_ms * 1000:
            if i - first >= a.min_steps:
                parts.append(steps[first:i])
            first = i
    for n, part in enumerate(parts):
        print(f"== part {n + 1} of {len(parts)}: from {part[0][0] / 1e6:.2f} s")
        summarize(part)


def summarize(steps):
    span = steps[-1][0] + steps[-1][6] - steps[0][0]
    busy = sum(s[6] for s in steps)
    decode_only = [s for s in steps if s[3] == s[2]]
    mixed = [s for s in steps if s[3] > s[2]]
    out_tokens = sum(s[2] for s in steps)
    prefill_tokens = sum(s[3] - s[2] for s in steps)
    print(f"steps {len(steps)}, span {span / 1e6:.2f} s, in steps {busy / 1e6:.2f} s, "
          f"between steps {(span - busy) / 1e6:.2f} s")
    print(f"decode tokens {out_tokens} ({out_tokens / span * 1e6:,.0f}/s over the span), "
          f"prompt tokens {prefill_tokens}")

    def line(name, group):
        if not group:
            print(f"{name:>22}: none")
            return
        t = sum(s[6] for s in group)
        rows = sum(s[2] for s in group) / len(group)
        pre = sum(s[3] - s[2] for s in group)
        print(f"{name:>22}: {len(group):6d} steps, {t / 1e6:7.2f} s ({100 * t / span:4.1f}%), "
              f"mean {t / len(group) / 1e3:6.2f} ms, decode rows {rows:6.1f}, prompt tokens {pre}")

    line("decode only", decode_only)
    line("decode + prompts", mixed)
    print("decode-only steps by decode rows:")
    buckets = {}
    for s in decode_only:
        b = 1 if s[2] == 1 else min(256, 1 << (s[2] - 1).bit_length())
        buckets.setdefault(b, []).append(s)
    for b in sorted(buckets):
        g = buckets[b]
        t = sum(s[6] for s in g)
        print(f"  <= {b:3d} rows: {len(g):6d} steps, {t / 1e6:6.2f} s, mean {t / len(g) / 1e3:6.2f} ms")
    peak = max(s[2] + (s[3] > s[2]) for s in steps)
    low = [s for s in steps if s[4] == 0 and s[5] < peak * 3 // 4]
    t = sum(s[6] for s in low)
    print(f"tail (nothing waiting, under 3/4 of the {peak} most sequences running): "
          f"{len(low)} steps, {t / 1e6:.2f} s ({100 * t / span:.1f}%)")


if __name__ == "__main__":
    main()
