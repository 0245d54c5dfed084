#!/usr/bin/env python3
"""A strict parser of the Prometheus text exposition format (version 0.0.4), for tests.

Usage: prom_parse.py FILE [NAME...]
Parses FILE (- for stdin) and fails (exit 1, the line and why) on anything the format
does not allow: a sample line that does not parse, a bad metric or label name, an
unescaped quote, a duplicate label, a sample whose family has no # TYPE or comes
after another family began, a duplicate series, a counter not ending in _total, a
histogram whose buckets are not cumulative or lack +Inf or whose _count is not the
+Inf bucket.  Then checks that each NAME is a family (# TYPE) in the text, and
prints one line per family: NAME TYPE SERIES.
"""
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class Bad(Exception):
    pass


def parse_value(text):
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    if text == "NaN":
        return math.nan
    if not re.fullmatch(r"[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)", text):
        raise Bad("not a number: %r" % text)
    return float(text)


def parse_labels(text, i):
    """text[i] is '{'; returns (labels, index after '}')."""
    labels = {}
    i += 1
    while True:
        if text[i] == "}":
            return labels, i + 1
        m = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*").match(text, i)
        if not m:
            raise Bad("bad label name at %d" % i)
        name = m.group(0)
        i = m.end()
        if text[i : i + 2] != '="':
            raise Bad("label %s: expected =\"" % name)
        i += 2
        value = []
        while True:
            if i >= len(text):
                raise Bad("label %s: unterminated value" % name)
            c = text[i]
            if c == "\\":
                nxt = text[i + 1 : i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise Bad("label %s: bad escape \\%s" % (name, nxt))
                value.append("\n" if nxt == "n" else nxt)
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise Bad("label %s: newline in value" % name)
            else:
                value.append(c)
                i += 1
        if name in labels:
            raise Bad("duplicate label %s" % name)
        labels[name] = "".join(value)
        if text[i] == ",":
            i += 1
        elif text[i] != "}":
            raise Bad("expected , or } after label %s" % name)


def family_of(sample, types):
    for suffix in ("_bucket", "_sum", "_count"):
        if sample.endswith(suffix) and types.get(sample[: -len(suffix)]) in ("histogram", "summary"):
            return sample[: -len(suffix)]
    return sample


def parse(text):
    types, helps, order, series = {}, {}, [], {}
    current = None
    done = set()
    for n, line in enumerate(text.split("\n"), 1):
        try:
            if line == "":
                continue
            if line.startswith("#"):
                parts = line.split(" ", 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    name = parts[2]
                    if not NAME.match(name):
                        raise Bad("bad metric name %r" % name)
                    if parts[1] == "TYPE":
                        if len(parts) != 4 or parts[3] not in TYPES:
                            raise Bad("bad TYPE line")
                        if name in types:
                            raise Bad("a second TYPE for %s" % name)
                        if name in done or name == current and name in series:
                            raise Bad("TYPE of %s after its samples" % name)
                        types[name] = parts[3]
                        order.append(name)
                    else:
                        if name in helps:
                            raise Bad("a second HELP for %s" % name)
                        helps[name] = parts[3] if len(parts) > 3 else ""
                    if current and current != name:
                        done.add(current)
                    current = name
                continue
            m = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*").match(line)
            if not m:
                raise Bad("bad sample line")
            sample = m.group(0)
            i = m.end()
            labels = {}
            if i < len(line) and line[i] == "{":
                labels, i = parse_labels(line, i)
            rest = line[i:]
            if not rest.startswith(" "):
                raise Bad("expected a space before the value")
            fields = rest.split()
            if len(fields) not in (1, 2):
                raise Bad("expected a value and an optional timestamp")
            value = parse_value(fields[0])
            if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
                raise Bad("bad timestamp")
            fam = family_of(sample, types)
            if fam not in types:
                raise Bad("sample of %s without a # TYPE" % fam)
            if fam in done:
                raise Bad("sample of %s after another family began" % fam)
            if current != fam:
                if current:
                    done.add(current)
                current = fam
            key = (sample, tuple(sorted(labels.items())))
            if key in series.setdefault(fam, {}):
                raise Bad("duplicate series %s%s" % (sample, labels))
            series[fam][key] = value
        except Bad as e:
            raise Bad("line %d: %s: %s" % (n, e, line))
        except IndexError:
            raise Bad("line %d: cut short: %s" % (n, line))
    for fam, t in types.items():
        if t == "counter" and not fam.endswith("_total"):
            raise Bad("counter %s does not end in _total" % fam)
        if t == "histogram":
            check_histogram(fam, series.get(fam, {}))
    return types, series


def check_histogram(fam, samples):
    groups = {}
    for (sample, labels), value in samples.items():
        d = dict(labels)
        le = d.pop("le", None)
        key = tuple(sorted(d.items()))
        g = groups.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if sample == fam + "_bucket":
            if le is None:
                raise Bad("%s_bucket without le" % fam)
            g["buckets"].append((parse_value(le), value))
        elif sample == fam + "_sum":
            g["sum"] = value
        elif sample == fam + "_count":
            g["count"] = value
        else:
            raise Bad("%s: stray sample %s" % (fam, sample))
    for key, g in groups.items():
        b = sorted(g["buckets"])
        if not b or b[-1][0] != math.inf:
            raise Bad("%s%s: no +Inf bucket" % (fam, dict(key)))
        if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
            raise Bad("%s%s: buckets are not cumulative" % (fam, dict(key)))
        if g["count"] is None or g["sum"] is None:
            raise Bad("%s%s: no _count or _sum" % (fam, dict(key)))
        if g["count"] != b[-1][1]:
            raise Bad("%s%s: _count is not the +Inf bucket" % (fam, dict(key)))


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    text = sys.stdin.read() if sys.argv[1] == "-" else open(sys.argv[1]).read()
    try:
        types, series = parse(text)
    except Bad as e:
        print("prom_parse: %s" % e, file=sys.stderr)
        return 1
    missing = [n for n in sys.argv[2:] if n not in types]
    for name in types:
        print(name, types[name], len(series.get(name, {})))
    if missing:
        print("prom_parse: missing: %s" % " ".join(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
