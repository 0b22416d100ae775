#!/usr/bin/env bash
# What does the prefill/decode path add to a request's latency, compared with a plain proxied request?
# One run, loopback only, bounded (~3-4 minutes), every process started here is stopped by PID on exit:
#   engines (the bundled simulator, near-zero engine time: --ttft-ms 1 --itl-ms 1 --prefill-us-per-token 0)
#     vLLM:   both (plain) | prefill + decode (P/D, kv_transfer_params signed with --pd-secret)
#     SGLang: both (plain) | prefill (bootstrap port) + decode
#   gateway "plain": round_robin over the `both` engine (model vllm / sglang)
#   gateway "pd":    policy pd over one prefill + one decode (model vllm / sglang)
#   load: ./kvgate bench, same open-loop schedule against direct engine, plain gateway and P/D gateway (compare mode),
#         streaming, max_tokens 4; plus the vLLM prefill leg alone (non-streaming, max_tokens 1, direct) = the
#         extra engine round trip the sequential vLLM P/D path inherently pays.
# Writes perf/results/pd-latency-<date>.md (machine, command, numbers, differences).
#
#   perf/pd-latency.sh                 # defaults below; env vars override
#   RATE=40 DURATION=15 PORT_BASE=23000 perf/pd-latency.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATE="${DATE:-2026-11-30}"
OUT="${OUT:-$ROOT/perf/results/pd-latency-$DATE.md}"
RATE="${RATE:-40}"
DURATION="${DURATION:-15}"
WARMUP="${WARMUP:-5}"
# Below the ephemeral range (32768+: outgoing connections of any process may hold those) and fresh per run.
PORT_BASE="${PORT_BASE:-$((21000 + (RANDOM % 200) * 40))}"
SECRET="${SECRET:-pd-latency-secret}"
ENGINE_FLAGS=(--ttft-ms 1 --itl-ms 1 --prefill-us-per-token 0)
KVGATE="$ROOT/kvgate"
JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"

P_VLLM_BOTH=$((PORT_BASE + 1)); P_VLLM_PREFILL=$((PORT_BASE + 2)); P_VLLM_DECODE=$((PORT_BASE + 3))
P_SGL_BOTH=$((PORT_BASE + 11)); P_SGL_PREFILL=$((PORT_BASE + 12)); P_SGL_DECODE=$((PORT_BASE + 13))
P_SGL_BOOT=$((PORT_BASE + 19))
P_GW_PLAIN=$((PORT_BASE + 21)); P_GW_PLAIN_ADMIN=$((PORT_BASE + 22))
P_GW_PD=$((PORT_BASE + 31)); P_GW_PD_ADMIN=$((PORT_BASE + 32))

WORK="$(mktemp -d /tmp/kvgate-pd-latency.XXXXXX)"
PIDS=()
cleanup() {
  local p c
  for p in "${PIDS[@]}"; do
    # Each recorded PID is the JVM itself (started with exec); children by parent PID only as a safety net.
    for c in $(pgrep -P "$p" 2>/dev/null); do kill "$c" 2>/dev/null || true; done
    if kill -0 "$p" 2>/dev/null; then kill "$p" 2>/dev/null || true; fi
  done
  for p in "${PIDS[@]}"; do
    # Bounded wait, then SIGKILL the same PID: never leave a JVM behind.
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then kill -9 "$p" 2>/dev/null || true; fi
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start() { # start NAME CMD... : background, PID recorded (exec: the PID is the process itself), log in $WORK/NAME.log
  local name="$1"; shift
  ( "$@" >"$WORK/$name.log" 2>&1 ) &
  PIDS+=("$!")
}

wait_http() { # wait_http NAME PORT : until GET /health answers 200 (bounded: 60 s)
  local name="$1" port="$2"
  for _ in $(seq 1 300); do
    if curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:$port/health" 2>/dev/null | grep -q 200; then return 0; fi
    sleep 0.2
  done
  echo "$name (port $port) did not become healthy; log:" >&2
  tail -20 "$WORK/$name.log" >&2
  exit 1
}

# Build once up front through the launcher (it rebuilds when sources changed), then run the tools jar the way the
# launcher does: 8 launchers started at once must not each decide to rebuild (the launcher's staleness check also
# looks at perf/ sources, which the tools build does not cover, so it would rebuild on every start).
"$KVGATE" sim --help >/dev/null 2>&1 || true
kv() { exec "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
  -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main "$@"; }

start vllm-both    kv sim --dialect vllm --role both --port "$P_VLLM_BOTH" --model vllm "${ENGINE_FLAGS[@]}"
start vllm-prefill kv sim --dialect vllm --role prefill --port "$P_VLLM_PREFILL" --model vllm --pd-secret "$SECRET" "${ENGINE_FLAGS[@]}"
start vllm-decode  kv sim --dialect vllm --role decode --port "$P_VLLM_DECODE" --model vllm --pd-secret "$SECRET" "${ENGINE_FLAGS[@]}"
start sgl-both     kv sim --dialect sglang --role both --port "$P_SGL_BOTH" --model sglang "${ENGINE_FLAGS[@]}"
start sgl-prefill  kv sim --dialect sglang --role prefill --bootstrap-port "$P_SGL_BOOT" --port "$P_SGL_PREFILL" --model sglang "${ENGINE_FLAGS[@]}"
start sgl-decode   kv sim --dialect sglang --role decode --port "$P_SGL_DECODE" --model sglang "${ENGINE_FLAGS[@]}"

cat >"$WORK/plain.yaml" <<YAML
listen: 127.0.0.1:$P_GW_PLAIN
admin_listen: 127.0.0.1:$P_GW_PLAIN_ADMIN
rules:
  - name: vllm
    models: [vllm]
    engine: vllm
    policy: round_robin
    endpoints:
      - url: http://127.0.0.1:$P_VLLM_BOTH
  - name: sglang
    models: [sglang]
    engine: sglang
    policy: round_robin
    endpoints:
      - url: http://127.0.0.1:$P_SGL_BOTH
YAML
cat >"$WORK/pd.yaml" <<YAML
listen: 127.0.0.1:$P_GW_PD
admin_listen: 127.0.0.1:$P_GW_PD_ADMIN
rules:
  - name: vllm
    models: [vllm]
    engine: vllm
    policy: pd
    endpoints:
      - url: http://127.0.0.1:$P_VLLM_PREFILL
        role: prefill
      - url: http://127.0.0.1:$P_VLLM_DECODE
        role: decode
  - name: sglang
    models: [sglang]
    engine: sglang
    policy: pd
    endpoints:
      - url: http://127.0.0.1:$P_SGL_PREFILL
        role: prefill
        bootstrap_port: $P_SGL_BOOT
      - url: http://127.0.0.1:$P_SGL_DECODE
        role: decode
YAML
start gw-plain kv serve --config "$WORK/plain.yaml"
start gw-pd    kv serve --config "$WORK/pd.yaml"

wait_http vllm-both "$P_VLLM_BOTH"; wait_http vllm-prefill "$P_VLLM_PREFILL"; wait_http vllm-decode "$P_VLLM_DECODE"
wait_http sgl-both "$P_SGL_BOTH"; wait_http sgl-prefill "$P_SGL_PREFILL"; wait_http sgl-decode "$P_SGL_DECODE"
wait_http gw-plain "$P_GW_PLAIN"; wait_http gw-pd "$P_GW_PD"

# One smoke request through each P/D path: fail loudly rather than measure error responses.
for m in vllm sglang; do
  code=$(curl -s -o "$WORK/smoke-$m.txt" -m 30 -w '%{http_code}' -H 'Content-Type: application/json' \
    -d "{\"model\":\"$m\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there, a smoke test of the pd path\"}],\"max_tokens\":4}" \
    "http://127.0.0.1:$P_GW_PD/v1/chat/completions" || true)
  if [ "$code" != 200 ]; then echo "P/D smoke request for $m answered $code: $(cat "$WORK/smoke-$m.txt")" >&2; for l in gw-pd "$m"-prefill "$m"-decode sgl-prefill sgl-decode; do [ -f "$WORK/$l.log" ] && { echo "== $l" >&2; tail -20 "$WORK/$l.log" >&2; }; done; exit 1; fi
done

BENCH_COMMON=(--workload fixed --arrival constant --rate "$RATE" --duration "$DURATION" --warmup "$WARMUP" --timeout 10 --drain 5 --quiet)
run_bench() { # run_bench NAME ARGS... : JSON into $WORK/NAME.json, bounded by timeout
  local name="$1"; shift
  echo "bench $name: $*" >&2
  timeout 120 "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
    -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main bench "$@" "${BENCH_COMMON[@]}" --out "$WORK/$name.json" >"$WORK/bench-$name.log" 2>&1 \
    || { echo "bench $name failed:" >&2; tail -20 "$WORK/bench-$name.log" >&2; exit 1; }
}
for m in vllm sglang; do
  if [ "$m" = vllm ]; then direct=$P_VLLM_BOTH; else direct=$P_SGL_BOTH; fi
  run_bench "$m" --model "$m" --stream --max-tokens 4 \
    --target "direct=http://127.0.0.1:$direct" \
    --compare "plain=http://127.0.0.1:$P_GW_PLAIN,pd=http://127.0.0.1:$P_GW_PD"
done
# The vLLM prefill leg on its own (what the gateway sends first: non-streaming, max_tokens 1), straight to an engine.
run_bench vllm-prefill-leg --model vllm --max-tokens 1 --target "leg=http://127.0.0.1:$P_VLLM_BOTH"

curl -s -m 5 "http://127.0.0.1:$P_GW_PD/metrics" >"$WORK/pd-metrics.txt" 2>/dev/null || true
if ! grep -q '^kvgate_pd_' "$WORK/pd-metrics.txt" 2>/dev/null; then
  curl -s -m 5 "http://127.0.0.1:$P_GW_PD_ADMIN/metrics" >"$WORK/pd-metrics.txt" 2>/dev/null || true
fi

MACHINE="$(lscpu | grep 'Model name' | sed 's/  */ /g'); nproc=$(nproc); mem=$(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r); $("$JAVA_HOME/bin/java" -version 2>&1 | head -1 || true); load avg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK" "$OUT" "$DATE" "$MACHINE" "$RATE" "$DURATION" "$WARMUP" <<'PY'
import json, sys, os, re
work, out, date, machine, rate, duration, warmup = sys.argv[1:8]
def load(n):
    with open(os.path.join(work, n + ".json")) as f:
        return json.load(f)
def tgt(rep, label):
    for t in rep["targets"]:
        if t["label"] == label:
            return t
    raise SystemExit("no target " + label)
def p(t, field, q):
    return t[field]["p" + q]
rows = []
lines = []
lines.append(f"# P/D path latency vs a plain proxied request — {date}\n")
lines.append(f"Machine: {machine}\n")
lines.append("Command: `perf/pd-latency.sh` (defaults: RATE=%s rps constant arrivals, DURATION=%s s measured after %s s warm-up "
             "per target, streaming chat, fixed 1 KiB body, max_tokens 4). Engines: `./kvgate sim` with "
             "`--ttft-ms 1 --itl-ms 1 --prefill-us-per-token 0`; gateways: `./kvgate serve`; load: `./kvgate bench` in "
             "compare mode (targets one after the other on the same schedule). Loopback only; the 2-core machine is shared "
             "with other jobs, so compare targets of the same run, not absolute numbers across runs.\n" % (rate, duration, warmup))
lines.append("Targets: **direct** = the `--role both` engine with no gateway; **plain** = gateway, `round_robin` rule over "
             "that engine; **pd** = gateway, `policy: pd` over one prefill + one decode engine.\n")
leg = tgt(load("vllm-prefill-leg"), "leg")
for m in ("vllm", "sglang"):
    rep = load(m)
    d, pl, pd = tgt(rep, "direct"), tgt(rep, "plain"), tgt(rep, "pd")
    lines.append(f"\n## {m}\n")
    lines.append("| target | ok / requests | errors | TTFT p50 ms | TTFT p99 ms | latency p50 ms | latency p99 ms | achieved rps |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for name, t in (("direct", d), ("plain", pl), ("pd", pd)):
        lines.append(f"| {name} | {t['ok']} / {t['requests']} | {t['errors']} | {p(t,'ttft_ms','50'):.3f} | {p(t,'ttft_ms','99'):.3f} | "
                     f"{p(t,'latency_ms','50'):.3f} | {p(t,'latency_ms','99'):.3f} | {t['achieved_rps']:.1f} |")
    lines.append("")
    lines.append("| difference | TTFT p50 ms | TTFT p99 ms | latency p50 ms | latency p99 ms |")
    lines.append("|---|---|---|---|---|")
    for name, a, b in (("plain − direct (gateway proxy hop)", pl, d), ("pd − plain (P/D path added)", pd, pl), ("pd − direct", pd, d)):
        lines.append(f"| {name} | {p(a,'ttft_ms','50')-p(b,'ttft_ms','50'):+.3f} | {p(a,'ttft_ms','99')-p(b,'ttft_ms','99'):+.3f} | "
                     f"{p(a,'latency_ms','50')-p(b,'latency_ms','50'):+.3f} | {p(a,'latency_ms','99')-p(b,'latency_ms','99'):+.3f} |")
    lines.append("")
    lines.append(f"Ratios pd / plain: TTFT p50 {p(pd,'ttft_ms','50')/p(pl,'ttft_ms','50'):.2f}x, TTFT p99 "
                 f"{p(pd,'ttft_ms','99')/p(pl,'ttft_ms','99'):.2f}x, latency p50 {p(pd,'latency_ms','50')/p(pl,'latency_ms','50'):.2f}x.")
    extra = p(pd, 'ttft_ms', '50') - p(pl, 'ttft_ms', '50')
    hop = p(pl, 'ttft_ms', '50') - p(d, 'ttft_ms', '50')
    if m == "vllm":
        legp50 = p(leg, 'latency_ms', '50')
        lines.append("")
        lines.append(f"The vLLM prefill leg alone, straight to an engine (non-streaming, max_tokens 1, same rate): latency p50 "
                     f"{legp50:.3f} ms, p99 {p(leg,'latency_ms','99'):.3f} ms ({leg['ok']} ok / {leg['requests']}).")
        lines.append("")
        lines.append(f"- **Inherent** (sequential vLLM P/D): the whole prefill round trip happens before the decode leg is sent: "
                     f"~{legp50:.2f} ms here (p50), plus one more pass through a proxy hop for that leg (plain − direct ≈ {hop:+.2f} ms).")
        lines.append(f"- **Added by P/D over plain** (TTFT p50): {extra:+.3f} ms. Minus the inherent leg and its hop: "
                     f"**~{extra-legp50-max(hop,0):+.2f} ms is the gateway's own P/D work** (building the prefill body, reading its JSON "
                     f"answer, the second routing decision, splicing kv_transfer_params into the decode body, a second upstream "
                     f"exchange) — plus noise of the order of the hop itself on this shared machine.")
    else:
        lines.append("")
        lines.append(f"- SGLang's legs are concurrent, so no full engine round trip is added; what is **inherent** is the "
                     f"rendezvous: the decode cannot emit its first token before the prefill's forward is done and the KV is "
                     f"handed over through the bootstrap connection (JOIN room → KV message), and two engine requests are "
                     f"scheduled instead of one (the simulator models both). The {extra:+.2f} ms TTFT p50 added over plain is that "
                     f"rendezvous + the second engine's scheduling + the gateway's share (bootstrap fields written into both "
                     f"bodies, a second upstream exchange); this measurement does not separate them.")
with open(os.path.join(work, "pd-metrics.txt")) as f:
    metrics = [l.rstrip() for l in f if l.startswith("kvgate_pd_") and "_bucket" not in l]
if metrics:
    lines.append("\n## P/D gateway counters at the end of the run\n")
    lines.append("```")
    lines.extend(metrics[:40])
    lines.append("```")
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
echo "wrote $OUT" >&2
