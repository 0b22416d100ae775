#!/usr/bin/python3
"""indie_engine: a second, independent engine for checking kvgate's routing quality.

kvgate's own simulator (tools/.../sim) was written alongside the router and could flatter it. This engine was
written separately, from the engines' documented behaviour only (vLLM v1's KV cache manager and its KV-event
publisher, as described in ../shared/docs/engine-contracts.md and vLLM's sources), and shares no code with kvgate:

* a paged prefix cache of --blocks blocks of --block-size tokens, hashed as vLLM's sha256_cbor hashes them
  (NONE_HASH = sha256(cbor(seed)); block digest = sha256(cbor([parent digest, tokens, None]))) and keyed on the
  wire by the digest's low 64 bits;
* vLLM's allocation and eviction: a request pins its cached prefix, takes new blocks from never-used ones first,
  then evicts the least recently freed cached block; a finished request frees its blocks tail-first, so a
  sequence's last block is evicted before its first; a full hit still recomputes the prompt's last token;
* full blocks are announced when they are scheduled (prefill start), also for generated tokens at the end;
  evictions are announced as BlockRemoved;
* ZeroMQ KV events as vLLM publishes them: PUB frames [topic, seq (8-byte big-endian), msgpack [ts, events, rank]],
  events as maps with "type" (current vLLM) or tag-first arrays (--event-form array); a ROUTER replay socket;
* --slots requests run at once, the rest wait FIFO; prefill costs --prefill-us-per-token per uncached token,
  decode --decode-ms-per-token per token;
* --hold (for a lockstep test driver, not an engine behaviour): a request stops after its prefill, holding its slot
  and blocks, until POST /indie/release releases every request received so far; with zero prefill and decode costs
  the engine is then a pure function of the order requests arrive in, whatever the host's speed;
* OpenAI /v1/completions (token-id or text prompts, stream or not) with usage.prompt_tokens_details.cached_tokens,
  /v1/models, /health, and /metrics with vLLM's metric names.

Only Debian's python3 packages are used (msgpack, zmq, cbor2). Text prompts are split on whitespace and each word
mapped to an id by CRC-32: routing-quality workloads send token ids.
"""
import argparse
import asyncio
import collections
import hashlib
import json
import random
import struct
import sys
import time
import zlib

import cbor2
import msgpack
import zmq
import zmq.asyncio


def none_hash(seed):
    return hashlib.sha256(cbor2.dumps(seed, canonical=True)).digest()


def block_digest(parent, tokens):
    return hashlib.sha256(cbor2.dumps([parent, list(tokens), None], canonical=True)).digest()


def wire_key(digest):
    return int.from_bytes(digest[-8:], "big")


class Block:
    __slots__ = ("digest", "key", "refs", "tokens", "parent")

    def __init__(self, digest, tokens, parent):
        self.digest = digest
        self.key = wire_key(digest)
        self.refs = 0
        self.tokens = tokens
        self.parent = parent


class PrefixCache:
    """vLLM-style block pool: cached blocks by digest, an LRU queue of freed cached blocks, never-used blocks."""

    def __init__(self, blocks, block_size, seed, publish):
        self.capacity = blocks
        self.block_size = block_size
        self.root = none_hash(seed)
        self.cached = {}                              # digest -> Block (held or evictable)
        self.evictable = collections.OrderedDict()    # digest -> Block, least recently freed first
        self.unused = blocks                          # blocks holding no cached content and not held
        self.held_uncached = 0                        # partial blocks held by running requests
        self.publish = publish
        self.queries = 0
        self.hits = 0

    def digests(self, tokens):
        out, parent = [], self.root
        bs = self.block_size
        for i in range(len(tokens) // bs):
            parent = block_digest(parent, tokens[i * bs:(i + 1) * bs])
            out.append(parent)
        return out

    def free_capacity(self):
        return self.unused + len(self.evictable)

    def usage(self):
        return 1.0 - self.free_capacity() / self.capacity

    def lookup(self, digests, prompt_len):
        """Cached prefix length in blocks; a full hit leaves the last token to recompute (vLLM)."""
        n = 0
        for d in digests:
            if d not in self.cached:
                break
            n += 1
        return min(n, (prompt_len - 1) // self.block_size)

    def take_block(self, events):
        if self.unused > 0:
            self.unused -= 1
            return
        digest, block = self.evictable.popitem(last=False)
        del self.cached[digest]
        events.append(("BlockRemoved", [block.key]))

    def admit(self, req):
        """Pins the cached prefix and allocates the rest, if the pool can; returns False to keep waiting."""
        bs = self.block_size
        total_tokens = len(req.prompt) + req.max_tokens
        need_blocks = -(-total_tokens // bs)
        hit = self.lookup(req.digests, len(req.prompt))
        hit_blocks = req.digests[:hit]
        reusable = sum(1 for d in hit_blocks if d in self.evictable)
        if self.free_capacity() - reusable < need_blocks - hit:
            return False
        self.queries += len(req.prompt)
        self.hits += hit * bs
        req.cached_tokens = hit * bs
        events = []
        for d in hit_blocks:
            b = self.cached[d]
            if b.refs == 0:
                self.evictable.pop(d, None)
            b.refs += 1
        req.held = list(hit_blocks)
        # The prompt's full blocks beyond the hit are computed in this prefill: cached at schedule time.
        stored = []
        for i in range(hit, len(req.digests)):
            self.take_block(events)
            d = req.digests[i]
            parent = req.digests[i - 1] if i > 0 else None
            b = self.cached.get(d)
            if b is None:
                b = Block(d, req.prompt[i * bs:(i + 1) * bs], parent)
                self.cached[d] = b
                stored.append(b)
            else:
                # Another request stored the same block meanwhile; vLLM keeps one copy and frees ours.
                self.evictable.pop(d, None)
                self.unused += 1
            b.refs += 1
            req.held.append(d)
        rest = need_blocks - len(req.digests)
        for _ in range(rest):
            self.take_block(events)
        self.held_uncached += rest
        req.uncached_held = rest
        if stored:
            events.append(("BlockStored", stored))
        self.publish(events)
        return True

    def finish(self, req, output):
        """Caches full blocks of prompt + output, then frees the request's blocks tail-first."""
        bs = self.block_size
        events, stored = [], []
        all_tokens = req.prompt + output
        parent = req.digests[-1] if req.digests else self.root
        for i in range(len(req.digests), len(all_tokens) // bs):
            d = block_digest(parent, all_tokens[i * bs:(i + 1) * bs])
            if req.uncached_held > 0 and d not in self.cached:
                req.uncached_held -= 1
                self.held_uncached -= 1
                b = Block(d, all_tokens[i * bs:(i + 1) * bs], parent if i > 0 else None)
                self.cached[d] = b
                b.refs = 1
                req.held.append(d)
                stored.append(b)
            parent = d
        if stored:
            events.append(("BlockStored", stored))
        self.unused += req.uncached_held
        self.held_uncached -= req.uncached_held
        req.uncached_held = 0
        for d in reversed(req.held):
            b = self.cached.get(d)
            if b is None:
                continue
            b.refs -= 1
            if b.refs == 0:
                self.evictable[d] = b
        req.held = []
        self.publish(events)


class Publisher:
    """vLLM's ZmqEventPublisher: [topic, seq, msgpack batch] on PUB, the last batches replayable on ROUTER."""

    def __init__(self, ctx, actx, endpoint, replay_endpoint, topic, form, block_size, rank, buffer_steps=10000):
        # PUB sends from the event loop's thread without waiting (a plain socket: an asyncio socket's send is a
        # future that must be awaited); the replay ROUTER is served by a coroutine on the asyncio context.
        self.pub = ctx.socket(zmq.PUB)
        self.pub.setsockopt(zmq.SNDHWM, 100000)
        self.pub.bind(endpoint)
        self.replay = None
        if replay_endpoint:
            self.replay = actx.socket(zmq.ROUTER)
            self.replay.bind(replay_endpoint)
        self.topic = topic.encode()
        self.form = form
        self.block_size = block_size
        self.rank = rank
        self.seq = 0
        self.events_sent = 0                      # events (not batches) published, for a driver's ingest barrier
        self.buffer = collections.deque(maxlen=buffer_steps)

    def encode(self, event):
        kind, body = event
        if kind == "BlockRemoved":
            if self.form == "map":
                return {"type": "BlockRemoved", "block_hashes": body, "medium": "GPU"}
            return ["BlockRemoved", body, "GPU"]
        if kind == "AllBlocksCleared":
            return {"type": "AllBlocksCleared"} if self.form == "map" else ["AllBlocksCleared"]
        # One BlockStored per chain segment: consecutive blocks whose parents link.
        out, seg = [], []
        for b in body:
            if seg and b.parent != seg[-1].digest:
                out.append(self.stored(seg))
                seg = []
            seg.append(b)
        if seg:
            out.append(self.stored(seg))
        return out

    def stored(self, seg):
        hashes = [b.key for b in seg]
        parent = wire_key(seg[0].parent) if seg[0].parent is not None else None
        tokens = [t for b in seg for t in b.tokens]
        if self.form == "map":
            return {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
                    "token_ids": tokens, "block_size": self.block_size, "lora_id": None, "medium": "GPU",
                    "lora_name": None}
        return ["BlockStored", hashes, parent, tokens, self.block_size, None, "GPU", None]

    def send(self, events):
        if not events:
            return
        encoded = []
        for e in events:
            x = self.encode(e)
            encoded.extend(x if isinstance(x, list) and x and not isinstance(x[0], str) else [x])
        payload = msgpack.packb([time.time(), encoded, self.rank], use_bin_type=True)
        self.events_sent += len(encoded)
        seq = struct.pack(">q", self.seq)
        self.buffer.append((self.seq, payload))
        self.seq += 1
        try:
            self.pub.send_multipart([self.topic, seq, payload], flags=zmq.NOBLOCK)
        except zmq.Again:
            pass  # the high-water mark drops the batch, as vLLM's publisher does; subscribers see a seq gap

    async def serve_replay(self):
        while self.replay is not None:
            frames = await self.replay.recv_multipart()
            if len(frames) < 3:
                continue
            client, start = frames[0], struct.unpack(">q", frames[-1].rjust(8, b"\0")[-8:])[0]
            for seq, payload in list(self.buffer):
                if seq >= start:
                    await self.replay.send_multipart([client, b"", struct.pack(">q", seq), payload])
            await self.replay.send_multipart([client, b"", struct.pack(">q", -1), b""])


class Request:
    __slots__ = ("prompt", "max_tokens", "digests", "held", "uncached_held", "cached_tokens", "ready", "queued_at")

    def __init__(self, prompt, max_tokens, digests):
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.digests = digests
        self.held = []
        self.uncached_held = 0
        self.cached_tokens = 0
        self.ready = asyncio.get_running_loop().create_future()
        self.queued_at = time.monotonic()


class Engine:
    def __init__(self, args, publisher):
        self.args = args
        self.publisher = publisher
        self.cache = PrefixCache(args.blocks, args.block_size, args.hash_seed, publisher.send)
        self.waiting = collections.deque()
        self.running = 0
        self.counters = collections.Counter()
        self.started = time.time()
        # --hold: requests numbered on arrival stop after prefill until /indie/release raises released past them.
        self.arrivals = 0
        self.released = 0
        self.release_event = asyncio.Event()

    def release(self):
        """Lets every request received so far run to its end (--hold); later ones stop again."""
        self.released = self.arrivals
        self.release_event.set()
        self.release_event = asyncio.Event()

    def schedule(self):
        while self.waiting and self.running < self.args.slots:
            req = self.waiting[0]
            if not self.cache.admit(req):
                break  # FIFO: the head waits for blocks, as vLLM's scheduler does without preemption
            self.waiting.popleft()
            self.running += 1
            req.ready.set_result(True)

    async def run(self, prompt, max_tokens):
        req = Request(prompt, max_tokens, self.cache.digests(prompt))
        self.arrivals += 1
        number = self.arrivals
        self.waiting.append(req)
        self.counters["requests_received"] += 1
        self.schedule()
        await req.ready
        try:
            uncached = len(prompt) - req.cached_tokens
            await asyncio.sleep(uncached * self.args.prefill_us_per_token / 1e6)
            while self.args.hold and number > self.released:
                await self.release_event.wait()
            rnd = random.Random(zlib.crc32(struct.pack(">%di" % min(len(prompt), 64), *prompt[-64:])))
            output = [rnd.randrange(1000, 30000) for _ in range(max_tokens)]
            for i, token in enumerate(output):
                yield i, token, req
                await asyncio.sleep(self.args.decode_ms_per_token / 1e3)
            self.cache.finish(req, output)
            self.counters["prompt_tokens"] += len(prompt)
            self.counters["generation_tokens"] += len(output)
            self.counters["requests_finished"] += 1
        finally:
            self.running -= 1
            self.schedule()

    def metrics(self):
        m = self.args.model
        c = self.cache
        lines = []

        def family(name, kind, helptext, value):
            lines.append("# HELP %s %s" % (name, helptext))
            lines.append("# TYPE %s %s" % (name, kind))
            lines.append('%s{model_name="%s",engine="0"} %s' % (name, m, value))

        family("vllm:num_requests_running", "gauge", "Requests in model execution batches.", self.running)
        family("vllm:num_requests_waiting", "gauge", "Requests waiting to be processed.", len(self.waiting))
        family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", c.usage())
        family("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in tokens.", c.queries)
        family("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in tokens.", c.hits)
        family("vllm:prompt_tokens_total", "counter", "Prefill tokens processed.", self.counters["prompt_tokens"])
        family("vllm:generation_tokens_total", "counter", "Generation tokens processed.",
               self.counters["generation_tokens"])
        family("vllm:request_success_total", "counter", "Successfully processed requests.",
               self.counters["requests_finished"])
        # Not vLLM's: what a lockstep driver waits on (every request arrived; every event a gateway could ingest).
        family("indie:requests_received_total", "counter", "Requests received.", self.counters["requests_received"])
        family("indie:kv_events_published_total", "counter", "KV events published.", self.publisher.events_sent)
        family("indie:requests_held", "gauge", "Requests stopped after prefill until /indie/release (--hold).",
               self.arrivals - self.released if self.args.hold else 0)
        family("vllm:cache_config_info", "gauge", "Cache configuration.", 1)
        lines[-1] = 'vllm:cache_config_info{block_size="%d",num_gpu_blocks="%d",prefix_caching_hash_algo=' \
                    '"sha256_cbor",enable_prefix_caching="True"} 1' % (self.args.block_size, self.args.blocks)
        return "\n".join(lines) + "\n"


def tokenize(prompt):
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return prompt
    if isinstance(prompt, str):
        return [1000 + zlib.crc32(w.encode()) % 50000 for w in prompt.split()]
    raise ValueError("prompt must be a string or a list of token ids")


def error_body(status, message, kind="BadRequestError", param=None):
    return status, {"error": {"message": message, "type": kind, "param": param, "code": status}}


class Http:
    """Just enough HTTP/1.1 (keep-alive, Content-Length bodies, chunked SSE answers) for the gateway's upstream."""

    def __init__(self, engine):
        self.engine = engine

    async def serve(self, reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                keep = headers.get("connection", "").lower() != "close"
                await self.dispatch(method, path.split("?")[0], body, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            writer.close()

    async def respond(self, writer, status, obj, ctype="application/json"):
        data = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
        writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
                     % (status, reason.encode(), ctype.encode(), len(data)) + data)
        await writer.drain()

    async def dispatch(self, method, path, body, writer):
        args = self.engine.args
        if method == "GET" and path == "/health":
            return await self.respond(writer, 200, "", "text/plain")
        if method == "GET" and path == "/metrics":
            return await self.respond(writer, 200, self.engine.metrics(), "text/plain; version=0.0.4")
        if method == "GET" and path == "/v1/models":
            return await self.respond(writer, 200, {"object": "list", "data": [
                {"id": args.model, "object": "model", "created": int(self.engine.started), "owned_by": "indie",
                 "max_model_len": args.max_model_len}]})
        if method == "GET" and path == "/indie/stats":
            c = self.engine.cache
            return await self.respond(writer, 200, {"queries": c.queries, "hits": c.hits,
                                                    "requests": self.engine.counters["requests_finished"],
                                                    "cached_blocks": len(c.cached), "running": self.engine.running,
                                                    "waiting": len(self.engine.waiting)})
        if method == "POST" and path == "/indie/release":
            self.engine.release()
            return await self.respond(writer, 200, {"released": self.engine.released})
        if method == "POST" and path == "/v1/completions":
            return await self.completions(body, writer)
        return await self.respond(writer, *error_body(404, "no route %s %s" % (method, path), "NotFoundError"))

    async def completions(self, body, writer):
        args = self.engine.args
        try:
            req = json.loads(body)
            prompt = tokenize(req.get("prompt"))
            max_tokens = int(req.get("max_tokens") or 16)
        except (ValueError, TypeError, AttributeError) as e:
            return await self.respond(writer, *error_body(400, "invalid request: %s" % e))
        if not prompt:
            return await self.respond(writer, *error_body(400, "prompt is empty", param="prompt"))
        if len(prompt) + max_tokens > args.max_model_len:
            return await self.respond(writer, *error_body(
                400, "This model's maximum context length is %d tokens. However, you requested %d tokens."
                % (args.max_model_len, len(prompt) + max_tokens), param="prompt"))
        rid = "cmpl-%016x" % random.getrandbits(64)
        created = int(time.time())
        stream = bool(req.get("stream"))
        if stream:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        text, last = [], None
        async for i, token, r in self.engine.run(prompt, max_tokens):
            last = r
            piece = " t%d" % token
            text.append(piece)
            if stream:
                chunk = {"id": rid, "object": "text_completion", "created": created, "model": args.model,
                         "choices": [{"index": 0, "text": piece, "logprobs": None,
                                      "finish_reason": "length" if i == max_tokens - 1 else None}]}
                await self.chunk(writer, "data: %s\n\n" % json.dumps(chunk))
        usage = {"prompt_tokens": len(prompt), "completion_tokens": max_tokens,
                 "total_tokens": len(prompt) + max_tokens,
                 "prompt_tokens_details": {"cached_tokens": last.cached_tokens if last else 0}}
        if stream:
            opts = req.get("stream_options") or {}
            if opts.get("include_usage"):
                await self.chunk(writer, "data: %s\n\n" % json.dumps(
                    {"id": rid, "object": "text_completion", "created": created, "model": args.model,
                     "choices": [], "usage": usage}))
            await self.chunk(writer, "data: [DONE]\n\n")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return
        await self.respond(writer, 200, {"id": rid, "object": "text_completion", "created": created,
                                         "model": args.model, "choices": [
                                             {"index": 0, "text": "".join(text), "logprobs": None,
                                              "finish_reason": "length"}], "usage": usage})

    async def chunk(self, writer, s):
        data = s.encode()
        writer.write(b"%x\r\n" % len(data) + data + b"\r\n")
        await writer.drain()


async def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--kv-endpoint", required=True, help="PUB bind endpoint, e.g. tcp://127.0.0.1:5557")
    p.add_argument("--replay-endpoint", default="")
    p.add_argument("--topic", default="")
    p.add_argument("--event-form", choices=["map", "array"], default="map")
    p.add_argument("--model", default="indie")
    p.add_argument("--blocks", type=int, default=96)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--hash-seed", default="0", help="the engine's PYTHONHASHSEED (NONE_HASH seed)")
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--max-model-len", type=int, default=65536)
    p.add_argument("--prefill-us-per-token", type=float, default=20.0)
    p.add_argument("--decode-ms-per-token", type=float, default=2.0)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--hold", action="store_true",
                   help="stop each request after its prefill until POST /indie/release (lockstep test drivers)")
    args = p.parse_args(argv)
    publisher = Publisher(zmq.Context(), zmq.asyncio.Context(), args.kv_endpoint, args.replay_endpoint, args.topic, args.event_form,
                          args.block_size, args.rank)
    engine = Engine(args, publisher)
    server = await asyncio.start_server(Http(engine).serve, args.host, args.port)
    if args.replay_endpoint:
        asyncio.ensure_future(publisher.serve_replay())
    print("indie engine on %s:%d, events on %s" % (args.host, args.port, args.kv_endpoint), flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1:]))
    except KeyboardInterrupt:
        pass
