#!/usr/bin/env python3
"""Reads what curl saved of a /v0/events stream and checks its form: only
`event: snapshot` events of one `data:` line of JSON each (and `:` comments), the
last one possibly cut off by curl's time limit.

Usage: sse_snapshots.py STREAM_FILE MIN_EVENTS [LAST_JSON_OUT]
Prints the number of whole snapshots; writes the last one to LAST_JSON_OUT.  Exits 1
(saying why) when the stream is malformed or holds fewer than MIN_EVENTS snapshots."""
import json
import sys

KEYS = ("time_ms", "nodes", "models", "requests", "stats")
STATS = ("window_s", "requests", "completion_tokens", "tokens_per_s", "ttft_ms_p50", "ttft_ms_p90",
         "duration_ms_p50", "errors", "in_flight")


def main():
    path, want = sys.argv[1], int(sys.argv[2])
    text = open(path, encoding="utf-8").read()
    snaps = []
    for block in text.split("\n\n")[:-1]:  # after the last blank line: a cut event, or nothing
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith(":"):
                continue
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            else:
                sys.exit(f"an unexpected line in the stream: {line[:200]!r}")
        if event is None and not data:
            continue  # a comment (keep-alive)
        if event != "snapshot" or len(data) != 1:
            sys.exit(f"not a snapshot event of one data line: {block[:300]!r}")
        snap = json.loads(data[0])
        missing = [k for k in KEYS if k not in snap] + [k for k in STATS if k not in snap.get("stats", {})]
        if missing:
            sys.exit(f"the snapshot lacks {missing}: {data[0][:300]}")
        for k in ("nodes", "models", "requests"):
            if not isinstance(snap[k], list):
                sys.exit(f"{k} is not a list: {data[0][:300]}")
        snaps.append(snap)
    print(len(snaps))
    if len(snaps) < want:
        sys.exit(f"{len(snaps)} snapshots, wanted at least {want}; the stream: {text[:300]!r}")
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w", encoding="utf-8") as f:
            json.dump(snaps[-1], f)


if __name__ == "__main__":
    main()
