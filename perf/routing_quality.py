#!/usr/bin/python3
"""Routing quality against an oracle (issue #35): engine-observed cache hit ratio per policy, as a fraction of an
offline best-known placement of the same trace, with TTFT and the busiest engine's share.

For each (engine kind, workload, gateways, policy) run: fresh engines (caches cold), fresh gateways, a seeded
workload driven by closed-loop clients (a new TCP connection per request, as behind an L4 balancer), then:

* observed hit ratio = the engines' own counters (vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total,
  deltas over the run), never the gateway's view;
* busiest share = the busiest engine's finished requests / all (vllm:request_success_total deltas), shown as a
  multiple of the mean share;
* TTFT p50/p99 from the clients (first streamed token);
* the oracle replays the recorded trace (token ids in arrival order) over one simulated LRU prefix cache per
  engine, the indie engine's own PrefixCache (same capacity, block size, allocation and eviction), under several
  placements made with full knowledge of the trace, and keeps the best: future-aware greedy (each request to the
  engine, within a load bound of 1.1, 1.25 or 1.5x the mean, maximising cached tokens now minus the future hits
  its evictions destroy) and a partition into prefix-sharing groups (a family; a conversation's turns) packed onto
  the engines largest first. It is a best-known bound, not a proven optimum, and it ignores time (requests in
  flight pin blocks in real engines; two requests of a new family arriving together both miss), which favours it.

The gateways' own routing-quality accounting (issue #35 item 1) is read beside it: each gateway's
kvgate_prompt_tokens_total{kind} and kvgate_routing_loss_tokens_total{cause} (deltas are the totals: fresh gateways),
and its access log, one line per request with reachable_tokens, predicted_tokens and the engine-reported
cached_tokens: the median |predicted - observed| per request (in tokens and blocks) says how well the index predicts
what the engine serves, and the unknown share says how much of the computed prompt the accounting could not explain.

Engines: `indie` (testkit/src/test/python/indie_engine.py, written apart from kvgate) or `sim` (./kvgate sim). Gateways:
`./kvgate serve`; with --gateways N > 1, HAProxy `mode tcp` round robin in front. Everything on loopback (127.0.0.0/8); every
process started here is stopped here, by PID; every wait is bounded.

  perf/routing-quality.sh                       # the matrix, results to perf/results/routing-quality-<date>.md
  perf/routing-quality.sh --quick --workloads shared-prefix --policies kv_exact --engines indie
"""
import argparse
import asyncio
import collections
import datetime
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "testkit", "src", "test", "python"))
import indie_engine  # noqa: E402  (the oracle reuses the indie engine's cache model)

BLOCK = 16


# ---------------------------------------------------------------------------------------------------------------
# Workloads: chains of requests. A chain runs in order (a conversation, an agent); clients take the next chain.
# ---------------------------------------------------------------------------------------------------------------

class Step:
    __slots__ = ("tokens", "pause", "max_tokens")

    def __init__(self, tokens, pause=0.0, max_tokens=2):
        self.tokens = tokens
        self.pause = pause
        self.max_tokens = max_tokens


def fresh(rnd, n):
    return [rnd.randrange(1000, 100000) for _ in range(n)]


def shared_prefix(rnd, quick):
    """Issue #35 shape 1: 12 families of 320 prefix + 48 unique tokens, 20 each, shuffled (more than one cache holds)."""
    families, per = 12, (8 if quick else 20)
    prefixes = [fresh(rnd, 320) for _ in range(families)]
    chains = [[Step(prefixes[f] + fresh(rnd, 48))] for f in range(families) for _ in range(per)]
    rnd.shuffle(chains)
    return chains, {"engines": 4, "blocks": 96, "slots": 4, "clients": 4}


def multi_turn(rnd, quick):
    """Issue #35 shape 2: 32 conversations on 2 shared 64-token system prompts, 96-token first turns, +32 per turn."""
    systems = [fresh(rnd, 64) for _ in range(2)]
    chains = []
    for c in range(16 if quick else 32):
        prompt = systems[c % 2] + fresh(rnd, 96)
        chain = []
        for _ in range(6):
            chain.append(Step(list(prompt)))
            prompt = prompt + fresh(rnd, 32)
        chains.append(chain)
    return chains, {"engines": 8, "blocks": 80, "slots": 2, "clients": 16}


def agentic(rnd, quick):
    """Long growing contexts with tool pauses of 0.2-2 s; sub-agents fork from a parent's prefix."""
    chains = []
    tools = fresh(rnd, 1500)                       # a tool catalogue every agent's system prompt carries
    for a in range(4 if quick else 8):
        prompt = tools + fresh(rnd, 400)
        chain = []
        for turn in range(4 if quick else 6):
            chain.append(Step(list(prompt), pause=rnd.uniform(0.2, 2.0) if turn else 0.0))
            prompt = prompt + fresh(rnd, rnd.randrange(200, 900))   # the tool's result and the next thought
        chains.append(chain)
        for s in range(2):                          # sub-agents: the parent's context so far + their own task
            base = list(chain[len(chain) // 2].tokens)
            chains.append([Step(base + fresh(rnd, 300), pause=rnd.uniform(0.2, 2.0)),
                           Step(base + fresh(rnd, 300) + fresh(rnd, 400), pause=rnd.uniform(0.2, 2.0))])
    return chains, {"engines": 4, "blocks": 1200, "slots": 4, "clients": 6}


def mixed(rnd, quick):
    """Prompt lengths 50-50,000 (log-uniform), half on one of 6 shared prefixes of 1-4k tokens."""
    prefixes = [fresh(rnd, rnd.randrange(1000, 4000)) for _ in range(6)]
    chains = []
    for _ in range(40 if quick else 100):
        n = int(math.exp(rnd.uniform(math.log(50), math.log(20000 if quick else 50000))))
        if rnd.random() < 0.5:
            p = rnd.choice(prefixes)
            chains.append([Step(p + fresh(rnd, n))])
        else:
            chains.append([Step(fresh(rnd, n))])
    return chains, {"engines": 4, "blocks": 8000, "slots": 4, "clients": 6}


WORKLOADS = {"shared-prefix": shared_prefix, "multi-turn": multi_turn, "agentic": agentic, "mixed": mixed}


# ---------------------------------------------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------------------------------------------

def oracle(trace, engines, blocks):
    """The best of several placements with full knowledge of the trace, each replayed over simulated LRU caches:
    future-aware greedy under three load bounds, and a partition of the trace into prefix-sharing groups packed
    onto the engines. Returns (hit ratio, busiest engine's share, name of the winning placement)."""
    digests = [indie_engine.PrefixCache(1, BLOCK, "0", None).digests(t) for t in trace]
    candidates = [("greedy-1.1", greedy_placement(trace, digests, engines, blocks, 1.1)),
                  ("greedy-1.25", greedy_placement(trace, digests, engines, blocks, 1.25)),
                  ("greedy-1.5", greedy_placement(trace, digests, engines, blocks, 1.5)),
                  ("partition", partition_placement(trace, digests, engines))]
    best = None
    for name, placement in candidates:
        ratio, share = replay(trace, digests, placement, engines, blocks)
        if best is None or ratio > best[0]:
            best = (ratio, share, name)
    return best


def replay(trace, digests, placement, engines, blocks):
    caches = [indie_engine.PrefixCache(blocks, BLOCK, "0", lambda events: None) for _ in range(engines)]
    hits = queries = 0
    for i, tokens in enumerate(trace):
        c = caches[placement[i]]
        req = _OracleRequest(tokens, digests[i])
        queries += len(tokens)
        if c.admit(req):   # False only when one request needs more blocks than a whole cache: a miss
            hits += req.cached_tokens
            c.finish(req, [])
    counts = collections.Counter(placement)
    return hits / max(1, queries), max(counts.values()) / max(1, len(trace))


def greedy_placement(trace, digests, engines, blocks, bound_factor):
    """Each request, in order, to the engine (assigned so far <= bound_factor x the mean + 1) maximising the cached
    tokens now minus the future hits its evictions destroy (an evicted block read again later costs its tokens)."""
    caches = [indie_engine.PrefixCache(blocks, BLOCK, "0", lambda events: None) for _ in range(engines)]
    uses = collections.defaultdict(collections.deque)   # digest -> indexes of the requests that read it, in order
    for i, ds in enumerate(digests):
        for d in ds:
            uses[d].append(i)
    assigned = [0] * engines
    placement = []
    for i, tokens in enumerate(trace):
        for d in digests[i]:
            if uses[d] and uses[d][0] == i:
                uses[d].popleft()
        bound = bound_factor * (i / engines) + 1
        best, best_score = None, None
        for e in range(engines):
            if assigned[e] > bound:
                continue
            c = caches[e]
            hit = c.lookup(digests[i], len(tokens))
            evict = max(0, -(-(len(tokens) + 2) // BLOCK) - hit - c.unused)
            lost = 0
            if evict:
                mine = set(digests[i][:hit])
                for d in c.evictable:
                    if evict == 0:
                        break
                    if d in mine:
                        continue
                    evict -= 1
                    if uses.get(d):
                        lost += BLOCK
            score = (hit * BLOCK - lost, -assigned[e])
            if best_score is None or score > best_score:
                best, best_score = e, score
        req = _OracleRequest(tokens, digests[i])
        if caches[best].admit(req):
            caches[best].finish(req, [])
        assigned[best] += 1
        placement.append(best)
    return placement


def partition_placement(trace, digests, engines):
    """Requests joined when they share their deepest shared prefix block (a family, or a conversation's turns
    linked pairwise), groups packed largest first onto the engine with the fewest requests."""
    readers = collections.Counter(d for ds in digests for d in set(ds))
    parent = list(range(len(trace)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    # A request joins every request whose deepest shared block lies on its own prefix chain: the family members
    # of a shared prefix, and a conversation's turns (each turn's prompt extends the last's).
    owner = {}
    for i, ds in enumerate(digests):
        deepest = next((d for d in reversed(ds) if readers[d] > 1), None)
        if deepest is not None:
            owner.setdefault(deepest, i)
    for i, ds in enumerate(digests):
        for d in ds:
            j = owner.get(d)
            if j is not None and find(j) != find(i):
                parent[find(i)] = find(j)
    groups = collections.defaultdict(list)
    for i in range(len(trace)):
        groups[find(i)].append(i)
    load = [0] * engines
    placement = [0] * len(trace)
    for members in sorted(groups.values(), key=len, reverse=True):
        e = min(range(engines), key=lambda k: load[k])
        for i in members:
            placement[i] = e
        load[e] += len(members)
    return placement


class _OracleRequest:
    def __init__(self, tokens, digests):
        self.prompt = tokens
        self.max_tokens = 2
        self.digests = digests
        self.held = []
        self.uncached_held = 0
        self.cached_tokens = 0


# ---------------------------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------------------------

class Fleet:
    def __init__(self, work):
        self.work = work
        self.procs = []

    def start(self, name, argv):
        log = open(os.path.join(self.work, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                             start_new_session=True)
        self.procs.append((name, p))
        return p

    def stop(self, p):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def stop_all(self):
        for _, p in reversed(self.procs):
            self.stop(p)
        self.procs = []

    def log_tail(self, name):
        try:
            with open(os.path.join(self.work, name + ".log")) as f:
                return "".join(f.readlines()[-20:])
        except OSError:
            return ""


def wait_http(url, what, fleet, name, timeout=240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.25)
    raise SystemExit("%s did not answer 200 on %s within %d s:\n%s" % (what, url, timeout, fleet.log_tail(name)))


def wait_listening(port, name, fleet, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("%s did not listen on %d within %d s:\n%s" % (name, port, timeout, fleet.log_tail(name)))


def scrape(url):
    with urllib.request.urlopen(url + "/metrics", timeout=15) as r:
        text = r.read().decode()
    sums = collections.Counter()
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if m:
            try:
                sums[m.group(1)] += float(m.group(3))
            except ValueError:
                pass
    return sums


# ---------------------------------------------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------------------------------------------

async def one_request(port, model, step, timeout):
    body = json.dumps({"model": model, "prompt": step.tokens, "max_tokens": step.max_tokens, "stream": True,
                       "temperature": 0}).encode()
    t0 = time.monotonic()
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: q\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), timeout)
        code = status.split(b" ")[1].decode() if status.count(b" ") >= 2 else "no-status"
        ok = code == "200"
        ttft = None
        while True:
            line = await asyncio.wait_for(reader.readline(), timeout)
            if not line:
                break
            if ttft is None and line.startswith(b"data: {") and b'"text"' in line:
                ttft = time.monotonic() - t0
        return code, ttft
    finally:
        writer.close()


async def send_and_record(port, model, step, timeout, ttfts, failures):
    """One request of a chain: its TTFT into {ttfts} when it answered 200, else its status (or the transport error's
    name) counted in {failures}. Both drivers send through here."""
    try:
        code, ttft = await one_request(port, model, step, timeout)
    except asyncio.TimeoutError:
        code, ttft = "timeout", None
    except OSError as e:
        code, ttft = type(e).__name__, None
    if code != "200":
        failures[code] += 1
    elif ttft is not None:
        ttfts.append(ttft)


async def drive(port, model, chains, clients, deadline_s, timeout=60):
    queue = collections.deque(chains)
    trace, ttfts, failures = [], [], collections.Counter()
    end = time.monotonic() + deadline_s

    async def client():
        while queue and time.monotonic() < end:
            chain = queue.popleft()
            for step in chain:
                if step.pause:
                    await asyncio.sleep(step.pause)
                trace.append(step.tokens)
                await send_and_record(port, model, step, timeout, ttfts, failures)

    await asyncio.gather(*(client() for _ in range(clients)))
    return trace, ttfts, failures


class KvWire:
    """The harness's own subscriber to every engine's KV-event PUB socket, counting events per engine the way a
    gateway counts them (kvgate_kv_events_total: the events of each batch). The lockstep barrier's target for an
    engine that does not say how many events it published (the simulator)."""

    def __init__(self, kv_ports):
        import threading
        import zmq
        self.counts = [0] * len(kv_ports)
        self.lock = threading.Lock()
        self.ctx = zmq.Context()
        self.socks = []
        for port in kv_ports:
            s = self.ctx.socket(zmq.SUB)
            s.setsockopt(zmq.SUBSCRIBE, b"")
            s.setsockopt(zmq.RCVTIMEO, 200)
            s.connect("tcp://127.0.0.1:%d" % port)
            self.socks.append(s)
        self.running = True
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        import msgpack
        import zmq
        poller = zmq.Poller()
        for s in self.socks:
            poller.register(s, zmq.POLLIN)
        while self.running:
            for s, _ in poller.poll(100):
                frames = s.recv_multipart()
                batch = msgpack.unpackb(frames[-1], raw=False, strict_map_key=False)
                with self.lock:
                    self.counts[self.socks.index(s)] += len(batch[1])

    def snapshot(self):
        with self.lock:
            return list(self.counts)

    def close(self):
        self.running = False
        self.thread.join(2)
        for s in self.socks:
            s.close(0)
        self.ctx.term()


def samples(url, names):
    """The samples of the named families on a Prometheus page: [(name, labels, value)]."""
    with urllib.request.urlopen(url + "/metrics", timeout=15) as r:
        text = r.read().decode()
    out = []
    for line in text.splitlines():
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)", line)
        if m and m.group(1) in names:
            out.append((m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")), float(m.group(3))))
    return out


class Lockstep:
    """What makes a run's verdict independent of the host's speed (the quality tier, issue #35 item 4): no decision
    is taken while anything it depends on is still on its way. Requests enter the fleet one at a time in a fixed
    order; after each, the barrier waits until the engines received it (so it was routed) and every gateway has
    ingested every KV event the engines published (the engines' own count, or this harness's subscriber's for the
    simulator), polling with a hard timeout instead of sleeping a guessed time. With --hold engines (the indie
    engine) a wave of requests stays in flight, stopped after prefill, until all were routed, so the load bound sees
    exactly the wave's requests; then the engines release them, and the next wave starts once every gateway is idle
    and has ingested the wave's last events. Without --hold (the simulator) a wave is one request."""

    def __init__(self, kind, engine_urls, http_ports, wire, admin_urls, timeout=120.0):
        self.kind = kind
        self.engine_urls = engine_urls
        self.http_ports = http_ports
        self.admin_urls = admin_urls
        self.timeout = timeout
        self.wire = wire
        self.polls = 0

    def close(self):
        if self.wire:
            self.wire.close()

    def engine_index(self, endpoint_label):
        for i, port in enumerate(self.http_ports):
            if endpoint_label.endswith(":%d" % port) or (":%d/" % port) in endpoint_label:
                return i
        return None

    def state(self):
        """(requests the engines received, events each engine published, per gateway: events ingested per engine
        and requests in flight)."""
        received, published = 0, []
        if self.kind == "indie":
            for u in self.engine_urls:
                got = {n: v for n, _, v in samples(u, ("indie:requests_received_total", "indie:kv_events_published_total"))}
                received += got.get("indie:requests_received_total", 0)
                published.append(got.get("indie:kv_events_published_total", 0))
        else:
            published = self.wire.snapshot()
        gateways = []
        for a in self.admin_urls:
            ingested, outstanding = [0.0] * len(self.engine_urls), 0.0
            for name, labels, v in samples(a, ("kvgate_kv_events_total", "kvgate_endpoint_outstanding")):
                if name == "kvgate_endpoint_outstanding":
                    outstanding += v
                else:
                    i = self.engine_index(labels.get("endpoint", ""))
                    if i is not None:
                        ingested[i] += v
            gateways.append((ingested, outstanding))
        return received, published, gateways

    def barrier(self, sent, idle):
        """Waits until the engines received {sent} requests (indie), every gateway ingested every published event,
        and (idle) no gateway has a request in flight. A bound, not a guess: SystemExit with the state at timeout.
        Polls back off from 5 to 100 ms (a gateway's metrics page is not free on a busy host)."""
        deadline = time.monotonic() + self.timeout
        pause = 0.005
        received, published, gateways = None, None, None
        while True:
            self.polls += 1
            try:
                received, published, gateways = self.state()
            except OSError:            # a page that did not come in time (a loaded host): poll again
                gateways = None
            ok = gateways is not None and (self.kind != "indie" or received == sent) and all(
                [int(x) for x in ingested] == [int(x) for x in published] and (not idle or outstanding == 0)
                for ingested, outstanding in gateways)
            if ok:
                return
            if time.monotonic() > deadline:
                raise SystemExit("lockstep barrier not reached in %.0f s after request %d (idle=%s): engines received "
                                 "%d, published events %s, gateways (ingested, in flight) %s"
                                 % (self.timeout, sent, idle, received, published, gateways))
            time.sleep(pause)
            pause = min(0.1, pause * 2)

    def release(self):
        if self.kind != "indie":
            return
        for u in self.engine_urls:
            req = urllib.request.Request(u + "/indie/release", data=b"", method="POST")
            with urllib.request.urlopen(req, timeout=15) as r:
                r.read()


async def drive_lockstep(port, model, chains, clients, deadline_s, lock, timeout=60):
    """Closed-loop clients in lockstep: each wave takes the next step of up to {clients} chains in a fixed order
    (a chain's next step waits for the wave its last step was in); see Lockstep."""
    pending = collections.deque(chains)
    active = []                        # [chain, next step index]
    trace, ttfts, failures = [], [], collections.Counter()
    end = time.monotonic() + deadline_s
    wave_size = clients if lock.kind == "indie" else 1
    sent = 0


    while (pending or active) and time.monotonic() < end:
        tasks = []
        while pending and len(active) < wave_size:
            active.append([pending.popleft(), 0])
        for entry in active[:wave_size]:
            step = entry[0][entry[1]]
            trace.append(step.tokens)
            tasks.append(asyncio.ensure_future(send_and_record(port, model, step, timeout, ttfts, failures)))
            sent += 1
            if lock.kind == "indie":
                await asyncio.to_thread(lock.barrier, sent, False)
            else:
                await tasks[-1]
                await asyncio.to_thread(lock.barrier, sent, True)
        await asyncio.to_thread(lock.release)
        await asyncio.gather(*tasks)
        await asyncio.to_thread(lock.barrier, sent, True)
        for entry in active:
            entry[1] += 1
        active = [e for e in active if e[1] < len(e[0])]
    return trace, ttfts, failures


def pct(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def strict_json(v):
    """NaN (a ratio with nothing to divide, e.g. no request a chwbl rule predicted) as null: JSON has no NaN, and
    strict readers (the quality tier's Jackson) refuse Python's."""
    if isinstance(v, float) and v != v:
        return None
    if isinstance(v, dict):
        return {k: strict_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [strict_json(x) for x in v]
    return v


# ---------------------------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------------------------

def rule_settings(settings):
    """--set SECTION.KEY=VALUE (a rule's kv.*, chwbl.*, ...) as the rule's YAML lines, grouped by section."""
    sections = collections.OrderedDict()
    for s in settings:
        key, _, value = s.partition("=")
        section, _, name = key.partition(".")
        if not name or not value:
            raise SystemExit("--set %r: expected SECTION.KEY=VALUE, e.g. kv.load_slack=1" % s)
        sections.setdefault(section, []).append((name, value))
    return "".join("    %s:\n%s" % (sec, "".join("      %s: %s\n" % kv for kv in keys)) for sec, keys in sections.items())


def gateway_yaml(port, admin, policy, endpoints, model, access_log, settings=(), lockstep=False):
    eps = "".join("      - url: http://%s:%d\n        kv_events: tcp://%s:%d\n" % (a, h, a, k)
                  for a, h, k in endpoints)
    return ("listen: 127.0.0.1:%d\nadmin_listen: 127.0.0.1:%d\ncontrol_socket: \"off\"\nhealth: {interval_ms: 1000}\n"
            "logging: {access_log: %s}\n%s"
            "rules:\n  - name: quality\n    models: [%s]\n    engine: vllm\n    policy: %s\n    block_size: %d\n"
            "    hash_seed: \"0\"\n%s    endpoints:\n%s") % (port, admin, json.dumps(access_log),
                                                      # lockstep: the engines' scraped load is a sample taken on a
                                                      # timer (and its peers' part ages on the wall clock); what a
                                                      # gateway knows of the others is their KV events only.
                                                      "load: {enabled: false}\n" if lockstep else "",
                                                      model, policy, BLOCK,
                                                      rule_settings(settings), eps)



def accounting(admin_urls, access_logs):
    """The gateways' routing-quality accounting over a run: their counters summed, and per request from the access
    logs the distance between what the index predicted on the chosen engine and what the engine reported serving."""
    kinds, causes = collections.Counter(), collections.Counter()
    for u in admin_urls:
        with urllib.request.urlopen(u + "/metrics", timeout=15) as r:
            text = r.read().decode()
        for line in text.splitlines():
            m = re.match(r'(kvgate_prompt_tokens_total|kvgate_routing_loss_tokens_total)\{([^}]*)\}\s+(\S+)', line)
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            if m.group(1) == "kvgate_prompt_tokens_total":
                kinds[labels["kind"]] += float(m.group(3))
            else:
                causes[labels["cause"]] += float(m.group(3))
    diffs, lines = [], 0
    for path in access_logs:
        try:
            with open(path) as f:
                for line in f:
                    j = json.loads(line)
                    lines += 1
                    if j.get("status") == 200 and j.get("predicted_tokens") is not None and j.get("cached_tokens") is not None:
                        diffs.append(abs(j["predicted_tokens"] - j["cached_tokens"]))
        except OSError:
            pass
    computed = sum(causes.values())
    explained = computed - causes["cold"]
    prompt = kinds["prompt"]
    return {"acc_prompt": prompt,
            "acc_reachable": kinds["reachable"] / prompt if prompt else float("nan"),
            "acc_predicted": kinds["predicted"] / prompt if prompt else float("nan"),
            "acc_observed": kinds["observed"] / prompt if prompt else float("nan"),
            "acc_median_abs_blocks": pct(diffs, 0.5) / BLOCK, "acc_p90_abs_blocks": pct(diffs, 0.9) / BLOCK,
            "acc_per_request": len(diffs), "acc_log_lines": lines,
            "acc_unknown_share": causes["unknown"] / computed if computed else float("nan"),
            "acc_unknown_share_noncold": causes["unknown"] / explained if explained else float("nan"),
            "acc_loss": {c: int(v) for c, v in sorted(causes.items(), key=lambda kv: -kv[1]) if v > 0}}


def run_one(args, fleet, ports, kind, workload, gateways, policy):
    rnd = random.Random(args.seed)
    chains, shape = WORKLOADS[workload](rnd, args.quick)
    engines, blocks, slots, clients = shape["engines"], shape["blocks"], shape["slots"], shape["clients"]
    model = "quality"
    endpoints, urls = [], []
    settings = list(args.set)
    if args.lockstep and policy == "kv_exact":
        # A routed request's blocks count for its engine until the engine's events confirm them; with requests held
        # in a queue that can take longer than the default 2 s on a slow host, and an expiry on the wall clock would
        # decide placements. Beyond the run's length, only events retire them.
        settings.append("kv.speculative_ttl_ms=600000")
    for e in range(engines):
        addr = stable_address(kind, workload, gateways, policy, e) if args.lockstep and kind == "indie" else None
        addr = addr or ("127.0.0.1", ports.take(), ports.take())
        host, http, kv = addr
        endpoints.append(addr)
        urls.append("http://%s:%d" % (host, http))
        name = "%s-engine%d" % (kind, e)
        if kind == "indie":
            fleet.start(name, ["/usr/bin/python3", os.path.join(ROOT, "testkit/src/test/python/indie_engine.py"),
                               "--host", host, "--port", str(http), "--kv-endpoint", "tcp://%s:%d" % (host, kv),
                               "--model", model,
                               "--blocks", str(blocks), "--slots", str(slots)]
                    + (["--hold", "--prefill-us-per-token", "0", "--decode-ms-per-token", "0"] if args.lockstep
                       else ["--prefill-us-per-token", "20", "--decode-ms-per-token", "2"]))
        else:
            fleet.start(name, [os.path.join(ROOT, "kvgate"), "sim", "--dialect", "vllm", "--port", str(http),
                               "--model", model, "--kv-events", "tcp://127.0.0.1:%d" % kv, "--kv-events-mode", "bind",
                               "--block-size", str(BLOCK), "--cache-blocks", str(blocks), "--hash-seed", "0",
                               "--max-concurrency", str(slots), "--queue", "4096", "--ttft-ms", "1",
                               "--prefill-us-per-token", "20", "--itl-ms", "2", "--seed", str(e + 1)])
    for e, u in enumerate(urls):
        wait_http(u + "/health", "engine", fleet, "%s-engine%d" % (kind, e))
    # Lockstep on the simulator counts its events on a subscriber of its own, connected before any gateway starts.
    wire = KvWire([k for _, _, k in endpoints]) if args.lockstep and kind != "indie" else None
    gw_ports, admin_urls, access_logs = [], [], []
    for g in range(gateways):
        port, admin = ports.take(), ports.take()
        gw_ports.append(port)
        admin_urls.append("http://127.0.0.1:%d" % admin)
        access_logs.append(os.path.join(fleet.work, "gw%dof%d-%s-%s-%s.access.jsonl" % (g, gateways, kind, workload, policy)))
        cfg = os.path.join(fleet.work, "gw%d.yaml" % g)
        with open(cfg, "w") as f:
            f.write(gateway_yaml(port, admin, policy, endpoints, model, access_logs[-1], settings, args.lockstep))
        fleet.start("gw%d" % g, [os.path.join(ROOT, "kvgate"), "serve", "--config", cfg])
    for g, port in enumerate(gw_ports):
        wait_http("http://127.0.0.1:%d/ready/engines" % port, "gateway", fleet, "gw%d" % g)
    front = gw_ports[0]
    if gateways > 1:
        front = ports.take()
        cfg = os.path.join(fleet.work, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write("global\n  maxconn 4096\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 120s\n"
                    "  timeout server 120s\nfrontend many\n  bind 127.0.0.1:%d\n  default_backend gws\n"
                    "backend gws\n  balance roundrobin\n" % front)
            for g, port in enumerate(gw_ports):
                f.write("  server g%d 127.0.0.1:%d\n" % (g, port))
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        fleet.start("haproxy", [haproxy, "-db", "-f", cfg])
        wait_listening(front, "haproxy", fleet)
    lock = None
    if args.lockstep:
        lock = Lockstep(kind, urls, [h for _, h, _ in endpoints], wire, admin_urls)
        lock.barrier(0, True)   # every gateway subscribed and idle (the harness's subscriber connected meanwhile)
    before = [scrape(u) for u in urls]
    t0 = time.time()
    try:
        if lock:
            trace, ttfts, failures = asyncio.run(drive_lockstep(front, model, chains, clients, args.deadline, lock))
        else:
            trace, ttfts, failures = asyncio.run(drive(front, model, chains, clients, args.deadline))
    finally:
        if lock:
            lock.close()
    elapsed = time.time() - t0
    if not lock:
        time.sleep(0.3)     # the engines' counters after the last answers (lockstep: the barrier waited for them)
    after = [scrape(u) for u in urls]
    acc = accounting(admin_urls, access_logs)
    fleet.stop_all()
    hits = sum(a["vllm:prefix_cache_hits_total"] - b["vllm:prefix_cache_hits_total"] for a, b in zip(after, before))
    queries = sum(a["vllm:prefix_cache_queries_total"] - b["vllm:prefix_cache_queries_total"]
                  for a, b in zip(after, before))
    served = [a["vllm:request_success_total"] - b["vllm:request_success_total"] for a, b in zip(after, before)]
    observed = hits / max(1.0, queries)
    busiest = max(served) / max(1.0, sum(served)) * engines
    o_ratio, o_busiest_share, o_name = oracle(trace, engines, blocks)
    return {"engine": kind, "workload": workload, "gateways": gateways, "policy": policy, "requests": len(trace),
            "planned": sum(len(c) for c in chains), "lockstep": bool(lock),
            "failures": sum(failures.values()),
            "failed_by": " ".join("%s:%d" % kv for kv in sorted(failures.items())) or "-",
            "observed": observed, "oracle": o_ratio,
            "fraction": observed / o_ratio if o_ratio > 0 else float("nan"),
            "busiest": busiest, "served": [int(x) for x in served], "oracle_busiest": o_busiest_share * engines, "oracle_placement": o_name,
            "ttft_p50_ms": pct(ttfts, 0.5) * 1e3, "ttft_p99_ms": pct(ttfts, 0.99) * 1e3, "seconds": elapsed, **acc}


def stable_address(kind, workload, gateways, policy, e):
    """Lockstep: engine e of this run at the same address in every run, so that what hashes endpoint keys
    (host:port: chwbl's ring) places alike; a loopback address of the run's own (127.35.<run>.<engine>, ports below
    the kernel's ephemeral range), so that the tier's runs started together do not collide. None when taken (a second
    tier on this host): the caller falls back to a free port on 127.0.0.1, and chwbl's ring is then another one."""
    run = zlib.crc32(("%s/%s/%d/%s" % (kind, workload, gateways, policy)).encode()) % 200 + 20
    host = "127.35.%d.%d" % (run, e + 1)
    http, kv = 21100 + e, 21200 + e
    for port in (http, kv):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                return None
    return host, http, kv


class Ports:
    def __init__(self, base):
        self.next = base

    def take(self):
        """The next port nobody on this host listens on (other test runs share the range); the engines and
        gateways bind it a moment later, so a collision is still possible, only far less likely."""
        while True:
            self.next += 1
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", self.next))
                    return self.next
                except OSError:
                    continue


def machine():
    cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout
    return "%s; nproc=%d; kernel %s" % (cpu.strip(), os.cpu_count(), os.uname().release)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--engines", default="indie,sim", help="engine kinds: indie,sim")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--policies", default="kv_exact,chwbl,round_robin")
    p.add_argument("--gateways", default="1,3")
    p.add_argument("--seed", type=int, default=35)
    p.add_argument("--quick", action="store_true", help="smaller workloads (the quality test tier's size)")
    p.add_argument("--lockstep", action="store_true",
                   help="drive in lockstep (the quality tier): one request enters at a time, each decision after "
                        "the previous ones' KV events are ingested; indie engines hold a wave in flight; no scraped "
                        "load (see Lockstep)")
    p.add_argument("--deadline", type=float, default=240, help="seconds a run may drive load (bounded)")
    p.add_argument("--out", default="")
    p.add_argument("--json", default="", help="also write the rows as JSON here")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="a rule setting for every gateway, e.g. kv.load_slack=1 or chwbl.prefix_blocks=8 (repeatable)")
    p.add_argument("--merge", nargs="+", default=[], metavar="JSON[=NOTE]",
                   help="write the report (--out) from the rows of earlier runs' --json files instead of running; "
                        "NOTE is appended to their policy column (e.g. a --set they ran with)")
    args = p.parse_args()
    if args.merge:
        rows = []
        for m in args.merge:
            path, _, note = m.partition("=")
            with open(path) as f:
                for r in json.load(f):
                    r = {k: float("nan") if v is None else v for k, v in r.items()}  # null: a ratio of nothing
                    if note:
                        r["policy"] = "%s (%s)" % (r["policy"], note)
                    rows.append(r)
        write_report(args, rows, os.environ.get("LOAD_START", "unknown").split())
        return
    work = tempfile.mkdtemp(prefix="kvgate-quality.")
    fleet = Fleet(work)
    ports = Ports(int(os.environ.get("PORT_BASE", 21000 + random.randrange(0, 150) * 60)))
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    rows = []
    load_start = open("/proc/loadavg").read().split()[:3]
    try:
        for kind in args.engines.split(","):
            for workload in args.workloads.split(","):
                for gateways in [int(g) for g in args.gateways.split(",")]:
                    for policy in args.policies.split(","):
                        ports.next = ports.next + 40 - (ports.next % 20)
                        row = run_one(args, fleet, ports, kind, workload, gateways, policy)
                        rows.append(row)
                        print("%(engine)-5s %(workload)-13s gw=%(gateways)d %(policy)-12s hit %(observed).3f "
                              "oracle %(oracle).3f %(oracle_placement)s (%(fraction).2fx) busiest %(busiest).2fx (oracle "
                              "%(oracle_busiest).2fx) ttft p50 %(ttft_p50_ms).0f p99 %(ttft_p99_ms).0f ms "
                              "n=%(requests)d fail=%(failures)d (%(failed_by)s) served %(served)s" % row, flush=True)
                        print("      accounting: reachable %(acc_reachable).3f predicted %(acc_predicted).3f observed "
                              "%(acc_observed).3f |predicted-observed| median %(acc_median_abs_blocks).2f blocks (p90 "
                              "%(acc_p90_abs_blocks).2f, %(acc_per_request)d requests) unknown %(acc_unknown_share).3f "
                              "loss %(acc_loss)s" % row, flush=True)
    finally:
        fleet.stop_all()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(strict_json(rows), f, indent=1)
    if args.out:
        write_report(args, rows, load_start)
    if not os.environ.get("KEEP_WORK"):
        shutil.rmtree(work, ignore_errors=True)


def command_line():
    """This invocation's arguments, without the output paths (they name this machine's directories)."""
    out, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
        elif a in ("--out", "--json"):
            skip = True
        else:
            out.append(a)
    return " ".join(out)


def write_report(args, rows, load_start):
    with open(args.out, "w") as f:
        f.write("# Routing quality against the oracle, %s\n\n" % datetime.date.today().isoformat())
        f.write("Machine: %s. Load average at start: %s. Command: `perf/routing-quality.sh %s`.\n\n"
                % (machine(), " ".join(load_start), command_line()))
        f.write("Hit = engine-observed prefix-cache hit ratio (the engines' own counters); oracle = the best of the "
                "placements made with full knowledge of the same trace, replayed over the engines' cache model "
                "(method in perf/routing_quality.py); busiest = the busiest engine's requests as a multiple of the "
                "mean; failed = requests that got no 200, by status or error.\n\n")
        f.write("| engine | workload | gateways | policy | requests | failed | hit | oracle | hit/oracle | busiest | "
                "oracle busiest | oracle placement | TTFT p50 ms | TTFT p99 ms |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write("| %(engine)s | %(workload)s | %(gateways)d | %(policy)s | %(requests)d | %(failures)d %(failed_by)s | "
                    "%(observed).3f | %(oracle).3f | %(fraction).2f | %(busiest).2f | %(oracle_busiest).2f | %(oracle_placement)s | "
                    "%(ttft_p50_ms).0f | %(ttft_p99_ms).0f |\n" % r)
        f.write("\nThe gateways' routing-quality accounting over the same runs (issue #35 item 1; how to read it: "
                "docs/routing.md, \"Reading the accounting\"). Reachable, predicted and observed are shares of the "
                "accounted prompt tokens (kvgate_prompt_tokens_total); |pred-obs| is the per-request distance, in "
                "blocks of %d tokens, between the tokens the index predicted on the chosen engine and the engine's "
                "cached_tokens (access log); unknown = kvgate_routing_loss_tokens_total{cause=\"unknown\"} over all "
                "computed prompt tokens (and over the non-cold ones); loss = computed prompt tokens by cause.\n\n"
                % BLOCK)
        f.write("| engine | workload | gateways | policy | reachable | predicted | observed | median pred-obs (blocks) | "
                "p90 pred-obs | requests | unknown (of non-cold) | loss by cause (tokens) |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write("| %(engine)s | %(workload)s | %(gateways)d | %(policy)s | %(acc_reachable).3f | %(acc_predicted).3f | "
                    "%(acc_observed).3f | %(acc_median_abs_blocks).2f | %(acc_p90_abs_blocks).2f | %(acc_per_request)d | "
                    "%(acc_unknown_share).3f (%(acc_unknown_share_noncold).3f) | " % r
                    + " ".join("%s %d" % kv for kv in r["acc_loss"].items()) + " |\n")


if __name__ == "__main__":
    main()
