#!/usr/bin/env python3
"""Samples every engine's running / waiting gauges (vLLM dialect) every INTERVAL ms into a CSV, until DURATION s
have passed or the stop file exists: the per-engine queue time series of a perf run (replicas-routing.sh SAMPLE_MS).
One kept-alive connection per engine; loopback only; bounded by DURATION.

  engine-sampler.py OUT.csv INTERVAL_MS DURATION_S STOP_FILE URL [URL...]
CSV columns: t_s (since start), engine (1-based), running, waiting (-1 when a scrape failed).
"""
import http.client, os, re, sys, time
from urllib.parse import urlparse

out, interval_ms, duration_s, stop_file = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
urls = [urlparse(u) for u in sys.argv[5:]]
conns = [None] * len(urls)
RUN = re.compile(rb'^vllm:num_requests_running\{[^}]*\} (\S+)', re.M)
WAIT = re.compile(rb'^vllm:num_requests_waiting\{[^}]*\} (\S+)', re.M)

def scrape(i):
    for attempt in range(2):
        try:
            if conns[i] is None:
                conns[i] = http.client.HTTPConnection(urls[i].hostname, urls[i].port, timeout=1)
            conns[i].request("GET", "/metrics")
            body = conns[i].getresponse().read()
            r = sum(float(x) for x in RUN.findall(body))
            w = sum(float(x) for x in WAIT.findall(body))
            return int(r), int(w)
        except Exception:
            try:
                conns[i].close()
            except Exception:
                pass
            conns[i] = None
    return -1, -1

start = time.monotonic()
with open(out, "w") as f:
    f.write("t_s,engine,running,waiting\n")
    nxt = start
    while time.monotonic() - start < duration_s and not os.path.exists(stop_file):
        t = time.monotonic() - start
        for i in range(len(urls)):
            r, w = scrape(i)
            f.write(f"{t:.3f},{i + 1},{r},{w}\n")
        nxt += interval_ms / 1000.0
        time.sleep(max(0.0, nxt - time.monotonic()))
