#!/usr/bin/env python3
"""Bytes allocated by all threads of a JVM between the start and the end of a JFR recording made with alloc.jfc.

usage: jfr print --json --events jdk.ThreadAllocationStatistics REC.jfr | jfr-alloc.py
prints: <total bytes> <threads>
jdk.ThreadAllocationStatistics carries each thread's cumulative allocated bytes; it is emitted when the recording
starts and when it stops. A thread seen only at the end was created during the recording: all its bytes count.
"""
import json
import sys

events = json.load(sys.stdin)["recording"]["events"]
by_thread = {}
end = max((e["values"]["startTime"] for e in events), default=None)
for e in events:
    v = e["values"]
    tid = (v.get("thread") or {}).get("javaThreadId")
    by_thread.setdefault(tid, []).append((v["startTime"], int(v["allocated"])))
total = 0
for samples in by_thread.values():
    samples.sort()
    if len(samples) >= 2:
        total += samples[-1][1] - samples[0][1]
    elif samples[0][0] == end:
        total += samples[0][1]
print(total, len(by_thread))
