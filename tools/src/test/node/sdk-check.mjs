#!/usr/bin/env node
// Drives a running kvgate gateway with the official OpenAI Node SDK and prints, one JSON line per scenario, what the
// SDK observed. It asserts nothing: OpenAiNodeSdkSystemTest (tools/src/test/java/io/kvgate/tools/sdk) parses the
// lines and decides. The engine behind the gateway is scripted: the last user message "scenario:<name>" selects
// its behaviour (plain answer, flat-shape error, death in the middle of a stream).
//
// Usage: node sdk-check.mjs <gateway base URL, e.g. http://127.0.0.1:8080/v1> [model] [alias]
// Environment: KVGATE_SDK_TENANT_KEY, the key of a tenant with requests_per_minute 2 (scenario tenant_rate_limit).
// Exit codes: 0 every scenario ran (whatever it observed); 1 a scenario hit an exception it was not written to
// observe (a bug in this script, or the SDK could not even talk to the gateway); 2 bad arguments; 3 overall deadline.

import OpenAI from 'openai';
import { VERSION } from 'openai/version';

const OVERALL_DEADLINE_MS = 45_000;
const REQUEST_TIMEOUT_MS = 15_000;

const baseURL = process.argv[2];
// The key of a tenant limited to 2 requests per minute (OpenAiNodeSdkSystemTest configures it); without it the
// tenant scenario is skipped (the control run straight at the engine has no tenants).
const tenantKey = process.env.KVGATE_SDK_TENANT_KEY ?? null;
const model = process.argv[3] ?? 'qwen3';
// A client name the gateway's rule serves as `model` (served_as): requests for it reach the engine as `model`.
const alias = process.argv[4] ?? 'gpt-4o-mini';
if (!baseURL || !/^https?:\/\//.test(baseURL)) {
  console.error('usage: node sdk-check.mjs <gateway base URL, e.g. http://127.0.0.1:8080/v1> [model]');
  process.exit(2);
}

// The caller also kills us on its own deadline; this one makes a hang visible in our own words.
setTimeout(() => {
  console.error(`sdk-check: overall deadline of ${OVERALL_DEADLINE_MS} ms exceeded`);
  process.exit(3);
}, OVERALL_DEADLINE_MS).unref();

// No retries: every request must reach the gateway exactly once, so what we print is what one call observed
// (the SDK retries 5xx by default, which would also re-run the scripted engine's scenario).
const client = new OpenAI({ baseURL, apiKey: 'sk-kvgate-sdk-check', maxRetries: 0, timeout: REQUEST_TIMEOUT_MS });

function describeError(e) {
  return {
    class: e?.constructor?.name ?? typeof e,
    is_api_error: e instanceof OpenAI.APIError,
    status: e?.status ?? null,
    message: e?.message ?? String(e),
    error_message: e?.error?.message ?? null,
    type: e?.type ?? null,
    param: e?.param ?? null,
    code: e?.code ?? null,
    request_id: e?.requestID ?? null,
  };
}

function user(content) {
  return [{ role: 'user', content }];
}

/** Runs a call that must fail; returns what the SDK raised, or says it did not raise. */
async function expectFailure(call) {
  try {
    const value = await call();
    return { threw: false, value: typeof value === 'object' ? value : String(value) };
  } catch (e) {
    return { threw: true, error: describeError(e) };
  }
}

/** Iterates a stream to its end or to its first error; the chunks seen before the error are kept. */
async function drainStream(stream) {
  const deltas = [];
  let finishReason = null;
  let chunks = 0;
  try {
    for await (const chunk of stream) {
      chunks++;
      const choice = chunk.choices?.[0];
      if (choice?.delta?.content) deltas.push(choice.delta.content);
      if (choice?.finish_reason) finishReason = choice.finish_reason;
    }
    return { threw: false, chunks, deltas, joined: deltas.join(''), finish_reason: finishReason };
  } catch (e) {
    return { threw: true, chunks, deltas, joined: deltas.join(''), finish_reason: finishReason, error: describeError(e) };
  }
}

const RATE_LIMIT_HEADERS = [
  'x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests',
  'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens', 'retry-after',
];

/** The rate-limit headers (and Retry-After) of a fetch Headers object, absent ones as null. */
function rateLimitHeaders(headers) {
  const out = {};
  for (const name of RATE_LIMIT_HEADERS) out[name] = headers?.get?.(name) ?? null;
  return out;
}

const scenarios = {
  async non_stream() {
    const r = await client.chat.completions.create({ model, messages: user('scenario:ok') });
    return {
      id: r.id,
      object: r.object,
      model: r.model,
      content: r.choices[0]?.message?.content ?? null,
      finish_reason: r.choices[0]?.finish_reason ?? null,
      total_tokens: r.usage?.total_tokens ?? null,
      request_id: r._request_id ?? null,
    };
  },

  async stream() {
    const s = await client.chat.completions.create({ model, messages: user('scenario:ok'), stream: true });
    const d = await drainStream(s);
    if (d.threw) throw Object.assign(new Error(`stream failed: ${d.error.message}`), { observed: d });
    return d;
  },

  async unknown_model() {
    return expectFailure(() => client.chat.completions.create({ model: 'no-such-model', messages: user('scenario:ok') }));
  },

  // A request the gateway must refuse itself: chat without `messages`.
  async invalid_request() {
    return expectFailure(() => client.chat.completions.create({ model }));
  },

  // Bytes that are not JSON, sent through the SDK's own request path (a string body with a content type is passed
  // verbatim), so the error is still parsed by the SDK.
  async malformed_json() {
    return expectFailure(() => client.post('/chat/completions', {
      body: `{"model": "${model}", "messages": [`,
      headers: { 'content-type': 'application/json' },
    }));
  },

  // The engine answers 400 in the older flat shape {"object":"error","message":...}.
  async engine_flat_error() {
    return expectFailure(() => client.chat.completions.create({ model, messages: user('scenario:flat_error') }));
  },

  // Same, for a streaming request (engines validate before they start the stream).
  async engine_flat_error_stream() {
    return expectFailure(async () => {
      const s = await client.chat.completions.create({ model, messages: user('scenario:flat_error'), stream: true });
      return drainStream(s);
    });
  },

  // The engine sends two content chunks, then its connection dies.
  async mid_stream_failure() {
    const s = await client.chat.completions.create({ model, messages: user('scenario:die_mid_stream'), stream: true });
    return drainStream(s);
  },

  // The engine sends two content chunks, then an in-stream error event in the flat shape, then [DONE].
  async engine_flat_error_frame() {
    const s = await client.chat.completions.create({ model, messages: user('scenario:flat_error_frame'), stream: true });
    return drainStream(s);
  },

  // The SDKs' models.retrieve: GET /v1/models/{id}.
  // (Straight at the scripted engine, which mounts no such route, this fails: observed, not unexpected.)
  async models_retrieve() {
    try {
      const m = await client.models.retrieve(model);
      return { threw: false, id: m.id, object: m.object, owned_by: m.owned_by ?? null };
    } catch (e) {
      return { threw: true, error: describeError(e) };
    }
  },

  // A model alias, JSON and streamed: the client must see its own name wherever the engine wrote its own.
  async alias_non_stream() {
    const r = await client.chat.completions.create({ model: alias, messages: user('scenario:ok') });
    return { model: r.model, content: r.choices[0]?.message?.content ?? null };
  },

  async alias_stream() {
    const s = await client.chat.completions.create({ model: alias, messages: user('scenario:ok'), stream: true });
    const models = new Set();
    let chunks = 0;
    let usage = null;
    for await (const chunk of s) {
      chunks++;
      models.add(chunk.model);
      if (chunk.usage) usage = chunk.usage;
    }
    return { models: [...models], chunks, usage };
  },

  async models_retrieve_alias() {
    try {
      const m = await client.models.retrieve(alias);
      return { threw: false, id: m.id, object: m.object };
    } catch (e) {
      return { threw: true, error: describeError(e) };
    }
  },

  async models_retrieve_missing() {
    return expectFailure(() => client.models.retrieve('no-such-model'));
  },

  // A field combination the gateway refuses for every engine (vLLM would 400, SGLang ignore it).
  async stream_options_without_stream() {
    return expectFailure(() => client.chat.completions.create({
      model, messages: user('scenario:ok'), stream_options: { include_usage: true },
    }));
  },

  // Prompt + max_tokens over the rule's context length (max_model_len 64): the gateway's own 400, before any engine.
  async context_length_exceeded() {
    return expectFailure(() => client.completions.create({
      model, prompt: Array.from({ length: 60 }, () => 7), max_tokens: 100,
    }));
  },

  // GET /v1/models through the SDK's paginated list: every client name, adapters with their parent.
  async models_list() {
    const models = [];
    for await (const m of client.models.list()) {
      models.push({ id: m.id, object: m.object, parent: m.parent ?? null });
    }
    return { models };
  },

  // A key the gateway does not know: 401.
  async authentication_error() {
    const stranger = new OpenAI({ baseURL, apiKey: 'sk-not-a-kvgate-key', maxRetries: 0, timeout: REQUEST_TIMEOUT_MS });
    return expectFailure(() => stranger.chat.completions.create({ model, messages: user('scenario:ok') }));
  },

  // A model whose only engine is unreachable: the gateway's own 5xx.
  async engine_unreachable() {
    return expectFailure(() => client.chat.completions.create({ model: 'kvgate-unreachable', messages: user('scenario:ok') }));
  },

  // A rule with room for one request at a time and no queue: while a slow stream holds it, a second request is shed.
  async rate_limited() {
    const held = await client.chat.completions.create({
      model: 'kvgate-limited', messages: user('scenario:slow_stream'), stream: true,
    });
    const second = await expectFailure(() => client.chat.completions.create({
      model: 'kvgate-limited', messages: user('scenario:ok'),
    }));
    // The engine holds the first stream until told (another rule, same engine): no race with a timer.
    await client.chat.completions.create({ model, messages: user('scenario:release') });
    const first = await drainStream(held);
    return { second, first_threw: first.threw, first_joined: first.joined };
  },

  // A tenant with requests_per_minute 2: a streamed call (its headers through .withResponse()), a plain one, then a
  // third that the gateway refuses with 429; the SDK must raise RateLimitError carrying the headers.
  async tenant_rate_limit() {
    if (!tenantKey) return { skipped: true };
    const tenant = new OpenAI({ baseURL, apiKey: tenantKey, maxRetries: 0, timeout: REQUEST_TIMEOUT_MS });
    const first = await tenant.chat.completions.create({ model, messages: user('scenario:ok'), stream: true }).withResponse();
    const streamed = await drainStream(first.data);
    if (streamed.threw) throw Object.assign(new Error(`stream failed: ${streamed.error.message}`), { observed: streamed });
    const second = await tenant.chat.completions.create({ model, messages: user('scenario:ok') }).withResponse();
    let third;
    try {
      const value = await tenant.chat.completions.create({ model, messages: user('scenario:ok') });
      third = { threw: false, value };
    } catch (e) {
      third = {
        threw: true,
        error: describeError(e),
        is_rate_limit_error: e instanceof OpenAI.RateLimitError,
        headers: rateLimitHeaders(e?.headers),
      };
    }
    return {
      skipped: false,
      stream: { status: first.response.status, joined: streamed.joined, headers: rateLimitHeaders(first.response.headers) },
      second: { status: second.response.status, headers: rateLimitHeaders(second.response.headers) },
      third,
    };
  },

  // Mid-stream failover (issue #41): both simulated engines behind rule "kvgate-failover" are armed to die after a few
  // tokens (once each), so the stream moves twice; the gateway stitches one stream, and the SDK must iterate it to
  // the end. Greedy, so the test compares the joined content with a fault-free run.
  async migrated_stream() {
    try {
      const s = await client.chat.completions.create({
        model: 'kvgate-failover', messages: user('Tell me about the river and the stone'), max_tokens: 24,
        temperature: 0, stream: true,
      });
      const ids = new Set();
      const seen = [];
      const wrapped = (async function* () {
        for await (const chunk of s) {
          ids.add(chunk.id);
          seen.push(chunk);
          yield chunk;
        }
      })();
      const d = await drainStream(wrapped);
      return { ...d, ids: [...ids], models: [...new Set(seen.map((c) => c.model))] };
    } catch (e) {
      return { threw: true, error: describeError(e) };
    }
  },

  // The engine dies in the middle of an SSE frame (after two complete ones).
  async mid_frame_failure() {
    const s = await client.chat.completions.create({ model, messages: user('scenario:die_mid_frame'), stream: true });
    return drainStream(s);
  },
};

let unexpected = 0;
console.log(JSON.stringify({ scenario: '_meta', sdk_version: VERSION, node: process.version, base_url: baseURL }));
for (const [name, run] of Object.entries(scenarios)) {
  try {
    const observed = await run();
    console.log(JSON.stringify({ scenario: name, unexpected: false, ...observed }));
  } catch (e) {
    unexpected++;
    console.log(JSON.stringify({
      scenario: name,
      unexpected: true,
      error: describeError(e),
      observed: e?.observed ?? null,
      stack: e?.stack ?? null,
    }));
  }
}
process.exit(unexpected === 0 ? 0 : 1);
