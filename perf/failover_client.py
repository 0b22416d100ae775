#!/usr/bin/env python3
"""Streaming client and report for perf/failover.sh and perf/drain-migrate.sh (issue #41's failover numbers).

  failover_client.py run --target http://127.0.0.1:PORT --requests N --concurrency C --seed S --run NAME --out F.json
      Sends the same deterministic request set for a given seed (a third each: chat, completions with a text prompt,
      completions with a token-id prompt and return_token_ids; greedy; max_tokens drawn from [MIN_TOKENS, MAX_TOKENS]),
      C at a time, every one streamed with stream_options.include_usage, and records per request what the client
      read: status, content, token ids, finish reason, usage, the stream's ids, error events, [DONE]s, and the arrival
      time of every content event. Bounded: --timeout per request (socket reads), --deadline for the whole run
      (requests not started by then are recorded as not sent).

  failover_client.py compare --reference REF.json --run RUN.json [--access-log LOG] [--ttft-ms T --prefill-us U]
      Checks RUN against the fault-free REF request by request and prints a JSON summary (errors, identical content,
      migrations from the access log, the client-side resume gaps next to the carried prefix's prefill time).
Standard library only (Debian's python3 has no requests).
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

WORDS = ("river stone light garden engine cloud market winter signal harbor paper silver forest window thunder "
         "number method planet bridge candle mirror orbit copper lantern valley meadow rocket canvas falcon ember "
         "glacier prism quartz saddle timber velvet willow zephyr anchor beacon cipher delta fable gravity").split()
SYSTEMS = [
    "You are a careful assistant that answers in plain prose.",
    "You are a terse technical writer; prefer short sentences.",
    "You summarise documents for busy engineers.",
    "You answer questions about geography and history.",
]


def request_set(n, seed, min_tokens, max_tokens, model):
    """The same list of (kind, path, body) for the same arguments: the fault-free run and the faulty run share it."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        kind = ("chat", "text", "ids")[i % 3]
        budget = rnd.randint(min_tokens, max_tokens)
        words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(20, 200)))
        common = {"model": model, "max_tokens": budget, "temperature": 0, "stream": True,
                  "stream_options": {"include_usage": True}}
        if kind == "chat":
            body = dict(common, messages=[{"role": "system", "content": rnd.choice(SYSTEMS)},
                                          {"role": "user", "content": f"Request {i}: {words}"}])
            path = "/v1/chat/completions"
        elif kind == "text":
            body = dict(common, prompt=f"{rnd.choice(SYSTEMS)} Request {i}: {words}")
            path = "/v1/completions"
        else:
            body = dict(common, prompt=[rnd.randrange(0, 151_643) for _ in range(rnd.randint(20, 300))],
                        return_token_ids=True)
            path = "/v1/completions"
        out.append((kind, path, body))
    return out


def stream_one(target, i, kind, path, body, run, timeout):
    u = urllib.parse.urlparse(target)
    rec = {"i": i, "kind": kind, "status": None, "error": None, "content": "", "token_ids": [], "finish": None,
           "usage": None, "ids": [], "error_events": 0, "done": 0, "times": [], "pieces": 0}
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(),
                     headers={"content-type": "application/json", "x-request-id": f"fo-{run}-{i}"})
        resp = conn.getresponse()
        rec["status"] = resp.status
        if resp.status != 200:
            rec["error"] = f"HTTP {resp.status}: {resp.read(2000).decode(errors='replace')}"
            return rec
        content = []
        ids = set()
        while True:
            if time.monotonic() - t0 > timeout * 4:
                rec["error"] = "request deadline"
                break
            line = resp.readline()
            if not line:
                break
            now_ms = (time.monotonic() - t0) * 1000.0
            line = line.decode("utf-8").rstrip("\r\n")
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                rec["done"] += 1
                continue
            ev = json.loads(data)
            if "error" in ev:
                rec["error_events"] += 1
                rec["error"] = "error event: " + data[:500]
                continue
            if ev.get("id") is not None:
                ids.add(ev["id"])
            if isinstance(ev.get("usage"), dict):
                rec["usage"] = ev["usage"]
            for c in ev.get("choices") or []:
                piece = (c.get("delta") or {}).get("content") if kind == "chat" else c.get("text")
                if piece:
                    content.append(piece)
                    rec["times"].append(round(now_ms, 3))
                    rec["pieces"] += 1
                rec["token_ids"].extend(c.get("token_ids") or [])
                if c.get("finish_reason"):
                    rec["finish"] = c["finish_reason"]
        rec["content"] = "".join(content)
        rec["ids"] = sorted(ids)
        if rec["error"] is None and rec["done"] != 1:
            rec["error"] = f"{rec['done']} [DONE] events"
        if rec["error"] is None and rec["finish"] is None:
            rec["error"] = "no finish_reason"
    except Exception as e:  # a transport error is a client-visible error: recorded, never raised
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        rec["elapsed_ms"] = round((time.monotonic() - t0) * 1000.0, 3)
        conn.close()
    return rec


def run(args):
    reqs = request_set(args.requests, args.seed, args.min_tokens, args.max_tokens, args.model)
    deadline = time.monotonic() + args.deadline
    results = [None] * len(reqs)
    started = time.time()

    def one(i):
        kind, path, body = reqs[i]
        if time.monotonic() > deadline:
            results[i] = {"i": i, "kind": kind, "error": "not sent (run deadline)", "status": None}
            return
        r = stream_one(args.target, i, kind, path, body, args.run, args.timeout)
        r["start_s"] = round(time.time() - started, 3)
        results[i] = r

    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        list(pool.map(one, range(len(reqs))))
    with open(args.out, "w") as f:
        json.dump({"run": args.run, "seed": args.seed, "started": started, "wall_s": round(time.time() - started, 3),
                   "results": results}, f)
    errors = sum(1 for r in results if r.get("error"))
    print(f"{args.run}: {len(results)} requests, {errors} with errors, {time.time() - started:.1f} s", file=sys.stderr)


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def compare(args):
    ref = {r["i"]: r for r in json.load(open(args.reference))["results"]}
    got = json.load(open(args.run))["results"]
    migrated = {}
    if args.access_log:
        prefix = "fo-" + json.load(open(args.run))["run"] + "-"
        with open(args.access_log) as f:
            for line in f:
                try:
                    a = json.loads(line)
                except ValueError:
                    continue
                rid = a.get("request_id") or ""
                if rid.startswith(prefix) and a.get("migrated_from"):
                    migrated[int(rid[len(prefix):])] = a["migrated_from"].split(",")
    errors, ref_errors, mismatched, ids_mismatched, usage_off = [], [], [], [], []
    gaps = []
    for r in got:
        i = r["i"]
        if ref[i].get("error"):
            ref_errors.append(i)
        if r.get("error"):
            errors.append({"i": i, "kind": r["kind"], "error": r["error"], "migrated_from": migrated.get(i)})
            continue
        if r["content"] != ref[i]["content"] or r["finish"] != ref[i]["finish"]:
            mismatched.append({"i": i, "kind": r["kind"], "migrated_from": migrated.get(i),
                               "ref_len": len(ref[i]["content"]), "got_len": len(r["content"])})
        if r["token_ids"] != ref[i]["token_ids"]:
            ids_mismatched.append(i)
        if len(r.get("ids", [])) != 1:
            errors.append({"i": i, "kind": r["kind"], "error": f"{len(r.get('ids', []))} stream ids"})
        ru, gu = ref[i].get("usage") or {}, r.get("usage") or {}
        if ru.get("completion_tokens") != gu.get("completion_tokens"):
            usage_off.append(i)
        moves = len(migrated.get(i, []))
        if moves and len(r["times"]) > 1:
            # The client-side resume gap: the longest pauses between content events of a stream that moved (one per
            # move), next to what the simulated engine needs to prefill the carried prefix (prompt + the tokens
            # before the pause): base TTFT + prefill per token, nothing cached.
            t = r["times"]
            steps = sorted(t[k] - t[k - 1] for k in range(1, len(t)))
            usual = steps[len(steps) // 2]
            # a request moved before its first content (retried whole) leaves no pause: only clear outliers count
            pauses = [p for p in sorted(((t[k] - t[k - 1], k) for k in range(1, len(t))), reverse=True)[:moves]
                      if p[0] > 3 * usual]
            prompt = (r.get("usage") or {}).get("prompt_tokens") or 0
            per_piece = max(1.0, ((r.get("usage") or {}).get("completion_tokens") or len(t)) / len(t))
            for gap, k in pauses:
                prefill = args.ttft_ms + args.prefill_us * (prompt + k * per_piece) / 1000.0
                gaps.append({"i": i, "gap_ms": gap, "prefill_ms": prefill, "excess_ms": gap - prefill})
    summary = {
        "requests": len(got),
        "client_visible_errors": len(errors),
        "errors": errors[:20],
        "reference_errors": len(ref_errors),
        "content_identical": len(got) - len(errors) - len(mismatched),
        "content_mismatched": len(mismatched),
        "mismatches": mismatched[:20],
        "token_ids_mismatched": len(ids_mismatched),
        "usage_completion_tokens_differ": len(usage_off),
        "streams_migrated": len(migrated),
        "migrations": sum(len(v) for v in migrated.values()),
        "resume_gap_client_ms": {"n": len(gaps), "p50": pct([g["gap_ms"] for g in gaps], 50),
                                 "p99": pct([g["gap_ms"] for g in gaps], 99),
                                 "max": max((g["gap_ms"] for g in gaps), default=None)},
        "carried_prefill_ms": {"p50": pct([g["prefill_ms"] for g in gaps], 50),
                               "p99": pct([g["prefill_ms"] for g in gaps], 99)},
        "gap_minus_prefill_ms": {"p50": pct([g["excess_ms"] for g in gaps], 50),
                                 "p99": pct([g["excess_ms"] for g in gaps], 99),
                                 "max": max((g["excess_ms"] for g in gaps), default=None)},
    }
    print(json.dumps(summary, indent=1))


def get_json(url):
    with urllib.request.urlopen(url, timeout=2) as r:
        return json.load(r)


def busiest(args):
    """The engine (host:port) with the most running + waiting requests (its /sim/stats)."""
    best, most = None, -1
    for e in args.engines.split(","):
        s = get_json(f"http://{e}/sim/stats")
        n = s.get("running", 0) + s.get("waiting", 0)
        if n > most:
            best, most = e, n
    print(best, most)


def watch_empty(args):
    """Polls every --every-ms until the gateway's outstanding count for the endpoint and the engine's running + waiting
    requests are both 0; prints the milliseconds that took (or -1 after --limit-s) and the last values seen."""
    t0 = time.monotonic()
    # measured from --from-ns (the wall clock when ctl answered), so this process's start is not left out
    offset_ms = (time.time_ns() - args.from_ns) / 1e6 if args.from_ns else 0.0
    gw = eng = None
    while time.monotonic() - t0 < args.limit_s:
        rules = get_json(f"{args.admin}/control/v1/endpoints")["rules"]
        gw = sum(e["outstanding"] for r in rules for e in r["endpoints"] if e["key"] == args.endpoint)
        s = get_json(f"http://{args.endpoint}/sim/stats")
        eng = s.get("running", 0) + s.get("waiting", 0)
        if gw == 0 and eng == 0:
            print(round(offset_ms + (time.monotonic() - t0) * 1000.0), gw, eng)
            return
        time.sleep(args.every_ms / 1000.0)
    print(-1, gw, eng)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--target", required=True)
    r.add_argument("--requests", type=int, default=1000)
    r.add_argument("--concurrency", type=int, default=32)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--min-tokens", type=int, default=64)
    r.add_argument("--max-tokens", type=int, default=256)
    r.add_argument("--model", default="m")
    r.add_argument("--run", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--timeout", type=float, default=30.0)
    r.add_argument("--deadline", type=float, default=600.0)
    c = sub.add_parser("compare")
    c.add_argument("--reference", required=True)
    c.add_argument("--run", required=True)
    c.add_argument("--access-log")
    c.add_argument("--ttft-ms", type=float, default=0.0)
    c.add_argument("--prefill-us", type=float, default=0.0)
    b = sub.add_parser("busiest")
    b.add_argument("--engines", required=True)
    w = sub.add_parser("watch-empty")
    w.add_argument("--admin", required=True)
    w.add_argument("--endpoint", required=True)
    w.add_argument("--every-ms", type=float, default=20.0)
    w.add_argument("--limit-s", type=float, default=10.0)
    w.add_argument("--from-ns", type=int, default=0, help="epoch nanoseconds the time is counted from")
    a = ap.parse_args()
    {"run": run, "compare": compare, "busiest": busiest, "watch-empty": watch_empty}[a.cmd](a)


if __name__ == "__main__":
    main()
