#!/usr/bin/env python3
"""JIT compilation and GC time of a JFR recording made with compile.jfc, inside given time windows.

usage: jfr print --json --events jdk.Compilation,jdk.GarbageCollection REC.jfr | jfr-compile.py WINDOWS
WINDOWS: lines "<label> <start epoch ns> <end epoch ns>". An event counts in the window its start falls in.
prints per window: <label> <compile ms> <compiles> <gc ms> <gcs> <the three longest compiles, ms:Class.method>
"""
import datetime
import json
import re
import sys


def seconds(iso):  # ISO-8601 duration as jfr prints it: PT0.054S, PT1M2.5S
    return sum(float(v) * {"H": 3600, "M": 60, "S": 1}[u] for v, u in re.findall(r"([0-9.]+)([HMS])", iso))


def epoch(ts):  # 2026-12-03T14:03:10.123456789Z (jfr prints UTC, nanosecond fraction)
    base, _, frac = ts.rstrip("Z").partition(".")
    whole = datetime.datetime.fromisoformat(base).replace(tzinfo=datetime.timezone.utc).timestamp()
    return whole + (float("0." + re.sub(r"[^0-9].*", "", frac)) if frac else 0.0)


events = json.load(sys.stdin)["recording"]["events"]
for line in open(sys.argv[1]):
    label, a, b = line.split()
    a, b = int(a) / 1e9, int(b) / 1e9
    inside = [e for e in events if a <= epoch(e["values"]["startTime"]) < b]
    compiles = [e["values"] for e in inside if e["type"] == "jdk.Compilation"]
    gcs = [e["values"] for e in inside if e["type"] == "jdk.GarbageCollection"]
    longest = sorted(compiles, key=lambda v: -seconds(v["duration"]))[:3]
    names = ",".join("%.0f:%s.%s" % (seconds(v["duration"]) * 1e3, v["method"]["type"]["name"].split("/")[-1],
                                     v["method"]["name"]) for v in longest)
    print("%s %.1f %d %.1f %d %s" % (label, sum(seconds(v["duration"]) for v in compiles) * 1e3, len(compiles),
                                    sum(seconds(v["duration"]) for v in gcs) * 1e3, len(gcs), names or "-"))
