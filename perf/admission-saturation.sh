#!/usr/bin/env bash
# Admission control under saturation (#14 "Numbers": offered load 2x the fleet's capacity with 10 % interactive
# traffic: interactive TTFT p99 within 2x of unloaded while batch is shed with 429; no request waits longer than
# admission.max_wait_ms). One run, loopback only, bounded (~3 minutes), every process started here is stopped by PID.
#
#   engines: ENGINES x `./kvgate sim --dialect vllm --max-concurrency CONC --ttft-ms 100 --itl-ms 5
#            --prefill-us-per-token 0` (streaming, max_tokens 20: ~195 ms per request on an engine slot)
#   gateway "admission": least_outstanding + admission {max_outstanding: CONC, interactive_reserve: RESERVE,
#            max_queue: 64, max_wait_ms: 1000}; interactive requests name their class with X-Kvgate-Priority, batch
#            requests get theirs from their API key (admission.api_key_priorities, by SHA-256)
#   gateway "noreserve": the same with interactive_reserve 0
#   gateway "none":      the same rule without admission control (today's behaviour: everything goes to the engines,
#            which queue it themselves)
#   1. capacity: closed loop straight at every engine at once, CONC connections each (its slots) -> the sum of the
#      achieved rps is the fleet's capacity
#   2. unloaded: interactive alone at 10 % of 2x capacity
#   3. loaded:   interactive (10 %) and batch (90 %) at 2x capacity together, two `./kvgate bench` processes
#                started at the same time against the admission gateway; then the same against "noreserve" and
#                "none"
# Writes perf/results/admission-<date>.md (machine, load average, command, numbers, the gateway's admission metrics).
#
#   perf/admission-saturation.sh                 # defaults; env vars override
#   DURATION=30 ENGINES=2 CONC=4 perf/admission-saturation.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATE="${DATE:-$(date -u +%Y-%m-%d)}"
OUT="${OUT:-$ROOT/perf/results/admission-$DATE.md}"
DURATION="${DURATION:-30}"
WARMUP="${WARMUP:-5}"
ENGINES="${ENGINES:-2}"
CONC="${CONC:-4}"
MAX_WAIT_MS="${MAX_WAIT_MS:-1000}"
RESERVE="${RESERVE:-1}"
PORT_BASE="${PORT_BASE:-$((21000 + (RANDOM % 200) * 40))}"
ENGINE_FLAGS=(--ttft-ms 100 --itl-ms 5 --prefill-us-per-token 0 --max-concurrency "$CONC")
JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
KEY_I="k-interactive-tenant"
KEY_B="k-batch-tenant"
FP_B="$(printf %s "$KEY_B" | sha256sum | cut -d' ' -f1)"

P_GW=$((PORT_BASE + 21)); P_GW_ADMIN=$((PORT_BASE + 22))
P_GW0=$((PORT_BASE + 31)); P_GW0_ADMIN=$((PORT_BASE + 32))
P_GWN=$((PORT_BASE + 33)); P_GWN_ADMIN=$((PORT_BASE + 34))

WORK="$(mktemp -d /tmp/kvgate-admission.XXXXXX)"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do
    if kill -0 "$p" 2>/dev/null; then kill "$p" 2>/dev/null || true; fi
  done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then kill -9 "$p" 2>/dev/null || true; fi
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

kv() { exec "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
  -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main "$@"; }
start() { # start NAME CMD... : background, PID recorded (exec: the PID is the JVM itself), log in $WORK/NAME.log
  local name="$1"; shift
  ( "$@" >"$WORK/$name.log" 2>&1 ) &
  PIDS+=("$!")
}
wait_http() {
  local name="$1" port="$2"
  for _ in $(seq 1 300); do
    if curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:$port/health" 2>/dev/null | grep -q 200; then return 0; fi
    sleep 0.2
  done
  echo "$name (port $port) did not become healthy; log:" >&2; tail -20 "$WORK/$name.log" >&2; exit 1
}
[ -f "$ROOT/tools/target/kvgate-tools.jar" ] || { echo "build first: ./mvnw -o -q -B -DskipTests package -pl tools -am" >&2; exit 1; }

EPS=""
for i in $(seq 1 "$ENGINES"); do
  start "sim$i" kv sim --dialect vllm --port $((PORT_BASE + i)) --model m "${ENGINE_FLAGS[@]}"
  EPS="$EPS      - url: http://127.0.0.1:$((PORT_BASE + i))
"
done
gateway_yaml() { # gateway_yaml PORT ADMIN_PORT ADMISSION_BLOCK
  cat <<YAML
listen: 127.0.0.1:$1
admin_listen: 127.0.0.1:$2
control_socket: "off"
api_keys: [$KEY_I, $KEY_B]
health: {interval_ms: 60000}
rules:
  - name: chat
    models: [m]
    policy: least_outstanding
$3    endpoints:
$EPS
YAML
}
admission_block() { # admission_block RESERVE
  printf '    admission:\n      max_outstanding: %s\n      interactive_reserve: %s\n      max_queue: 64\n      max_wait_ms: %s\n      api_key_priorities: {%s: batch}\n' \
    "$CONC" "$1" "$MAX_WAIT_MS" "$FP_B"
}
gateway_yaml "$P_GW" "$P_GW_ADMIN" "$(admission_block "$RESERVE")
" >"$WORK/admission.yaml"
gateway_yaml "$P_GWN" "$P_GWN_ADMIN" "$(admission_block 0)
" >"$WORK/noreserve.yaml"
gateway_yaml "$P_GW0" "$P_GW0_ADMIN" "" >"$WORK/none.yaml"
start gw-admission kv serve --config "$WORK/admission.yaml"
start gw-none kv serve --config "$WORK/none.yaml"
start gw-noreserve kv serve --config "$WORK/noreserve.yaml"
for i in $(seq 1 "$ENGINES"); do wait_http "sim$i" $((PORT_BASE + i)); done
wait_http gw-admission "$P_GW"; wait_http gw-none "$P_GW0"; wait_http gw-noreserve "$P_GWN"

BENCH_COMMON=(--model m --workload fixed --payload-bytes 512 --stream --max-tokens 20 --timeout 20 --drain 5 --quiet)
bench() { # bench NAME ARGS... : JSON into $WORK/NAME.json (bounded by timeout)
  local name="$1"; shift
  echo "bench $name: $*" >&2
  timeout 180 "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
    -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main bench "$@" "${BENCH_COMMON[@]}" \
    --out "$WORK/$name.json" >"$WORK/bench-$name.log" 2>&1 \
    || { echo "bench $name failed:" >&2; tail -20 "$WORK/bench-$name.log" >&2; return 1; }
}
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"

# 1. Capacity: every engine at once, as many connections as it has slots, each sending its next request when its
#    last one finished: the engines' own throughput, with no gateway in between.
CAP_PIDS=()
for i in $(seq 1 "$ENGINES"); do
  bench "capacity$i" --target "sim$i=http://127.0.0.1:$((PORT_BASE + i))" --closed-loop --connections "$CONC" \
    --duration 15 --warmup 3 & CAP_PIDS+=($!)
done
for p in "${CAP_PIDS[@]}"; do wait "$p"; done
CAP="$(python3 -c "import json;print(sum(json.load(open('$WORK/capacity%d.json' % i))['targets'][0]['achieved_rps'] for i in range(1, $ENGINES + 1)))")"
TOTAL="$(python3 -c "print(round(2*$CAP,1))")"
RATE_I="$(python3 -c "print(round(0.1*$TOTAL,2))")"
RATE_B="$(python3 -c "print(round(0.9*$TOTAL,2))")"
echo "capacity $CAP rps -> offered $TOTAL rps: interactive $RATE_I, batch $RATE_B" >&2
COMMON_I=(--api-key "$KEY_I" --header X-Kvgate-Priority:interactive --rate "$RATE_I" --duration "$DURATION" --warmup "$WARMUP" --seed 1)
COMMON_B=(--api-key "$KEY_B" --rate "$RATE_B" --duration "$DURATION" --warmup "$WARMUP" --seed 2)

# 2. Unloaded: the interactive stream alone (same schedule as in the loaded run).
bench unloaded --target "gw=http://127.0.0.1:$P_GW" "${COMMON_I[@]}"
# 3. Loaded, admission gateway: both streams at once.
curl -s -m 5 "http://127.0.0.1:$P_GW/metrics" -H "Authorization: Bearer $KEY_I" >"$WORK/metrics-before.txt"
bench loaded-interactive --target "gw=http://127.0.0.1:$P_GW" "${COMMON_I[@]}" & BI=$!
bench loaded-batch --target "gw=http://127.0.0.1:$P_GW" "${COMMON_B[@]}" & BB=$!
wait $BI; wait $BB
curl -s -m 5 "http://127.0.0.1:$P_GW/metrics" -H "Authorization: Bearer $KEY_I" >"$WORK/metrics-after.txt"
# 4. The same offered load through admission control without the interactive reserve.
curl -s -m 5 "http://127.0.0.1:$P_GWN/metrics" -H "Authorization: Bearer $KEY_I" >"$WORK/metrics-nr-before.txt"
bench nr-interactive --target "noreserve=http://127.0.0.1:$P_GWN" "${COMMON_I[@]}" & RI=$!
bench nr-batch --target "noreserve=http://127.0.0.1:$P_GWN" "${COMMON_B[@]}" & RB=$!
wait $RI; wait $RB
curl -s -m 5 "http://127.0.0.1:$P_GWN/metrics" -H "Authorization: Bearer $KEY_I" >"$WORK/metrics-nr-after.txt"
# 5. The same offered load without admission control (reference: today's behaviour).
bench none-interactive --target "none=http://127.0.0.1:$P_GW0" "${COMMON_I[@]}" & NI=$!
bench none-batch --target "none=http://127.0.0.1:$P_GW0" "${COMMON_B[@]}" & NB=$!
wait $NI; wait $NB
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

MACHINE="$(lscpu | grep 'Model name' | sed 's/  */ /g'); nproc=$(nproc); mem=$(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r); $("$JAVA_HOME/bin/java" -version 2>&1 | head -1 || true)"
python3 - "$WORK" "$OUT" "$DATE" "$MACHINE" "$LOAD_START" "$LOAD_END" "$CAP" "$TOTAL" "$RATE_I" "$RATE_B" "$MAX_WAIT_MS" \
  "$ENGINES" "$CONC" "$DURATION" "$WARMUP" "$RESERVE" <<'PY'
import json, os, re, sys
(work, out, date, machine, load_start, load_end, cap, total, rate_i, rate_b, max_wait_ms, engines, conc, duration,
 warmup, reserve) = sys.argv[1:17]
def t(name):
    with open(os.path.join(work, name + ".json")) as f:
        return json.load(f)["targets"][0]
def metrics(name):
    m = {}
    with open(os.path.join(work, name)) as f:
        for line in f:
            if line.startswith("kvgate_admission_") or line.startswith("kvgate_shed_total") or line.startswith("kvgate_requests_total"):
                k, v = line.rsplit(" ", 1)
                m[k] = float(v)
    return m
before, after = metrics("metrics-before.txt"), metrics("metrics-after.txt")
nr_before, nr_after = metrics("metrics-nr-before.txt"), metrics("metrics-nr-after.txt")
def delta(k, a=None, b=None):
    a = after if a is None else a
    b = before if b is None else b
    return a.get(k, 0.0) - b.get(k, 0.0)
u, li, lb, ni, nb = t("unloaded"), t("loaded-interactive"), t("loaded-batch"), t("none-interactive"), t("none-batch")
ri, rb = t("nr-interactive"), t("nr-batch")
def row(label, x):
    e = x["errors_by_class"]
    ttft = x.get("ttft_ms") or {}
    lat = x.get("latency_ms") or {}
    f = lambda d, k: ("%.1f" % d[k]) if d and k in d else "-"
    return (f"| {label} | {x['requests']} | {x['ok']} | {e.get('http_4xx', 0)} | {e.get('http_5xx', 0)} | "
            f"{sum(e.values()) - e.get('http_4xx', 0) - e.get('http_5xx', 0)} | {f(ttft,'p50')} | {f(ttft,'p99')} | "
            f"{f(ttft,'max')} | {f(lat,'p99')} | {x['goodput_rps']:.1f} |")
L = []
L.append(f"# Admission control at 2x the fleet's capacity — {date}\n")
L.append(f"Machine: {machine}. Load average (1/5/15 min) at start {load_start}, at end {load_end} (2 cores shared with"
         " other helpers' builds: compare rows of this run, not absolute numbers across runs).\n")
L.append(f"Command: `perf/admission-saturation.sh` (DURATION={duration} s measured after {warmup} s warm-up per run). "
         f"Fleet: {engines} `./kvgate sim --dialect vllm --max-concurrency {conc} --ttft-ms 100 --itl-ms 5 "
         "--prefill-us-per-token 0` engines; requests: streaming chat, 512-byte body, max_tokens 20 (~195 ms per engine slot). "
         f"Gateway rule: `least_outstanding` + `admission: {{max_outstanding: {conc}, interactive_reserve: {reserve}, max_queue: 64, "
         f"max_wait_ms: {max_wait_ms}}}` (\"noreserve\": interactive_reserve 0; \"none\": no admission block); "
         "interactive traffic sends `X-Kvgate-Priority: interactive`, batch traffic is classed by its API key "
         "(`admission.api_key_priorities`). Load: `./kvgate bench`, open loop, Poisson arrivals, latencies from the "
         "intended send time (no coordinated omission); the two classes are two bench processes started together.\n")
L.append(f"**Capacity** (closed loop straight at each engine, {conc} connections = its slots, all engines at once, summed): "
         f"{float(cap):.1f} req/s. **Offered**: 2x = {total} req/s = interactive {rate_i} + batch {rate_b} req/s.\n")
L.append("| run | requests | ok | 4xx (429) | 5xx | other errors | TTFT p50 ms | TTFT p99 ms | TTFT max ms | latency p99 ms | goodput rps |")
L.append("|---|---|---|---|---|---|---|---|---|---|---|")
L.append(row("unloaded: interactive alone", u))
L.append(row("2x, admission: interactive", li))
L.append(row("2x, admission: batch", lb))
L.append(row("2x, admission without reserve: interactive", ri))
L.append(row("2x, admission without reserve: batch", rb))
L.append(row("2x, no admission: interactive", ni))
L.append(row("2x, no admission: batch", nb))
ratio = li["ttft_ms"]["p99"] / u["ttft_ms"]["p99"]
ratio0 = ni["ttft_ms"]["p99"] / u["ttft_ms"]["p99"] if ni.get("ttft_ms") else float("nan")
ratio_nr = ri["ttft_ms"]["p99"] / u["ttft_ms"]["p99"] if ri.get("ttft_ms") else float("nan")
L.append("")
L.append(f"- **Interactive TTFT p99 under 2x load / unloaded: {ratio:.2f}x** (goal ≤ 2x: {'met' if ratio <= 2 else 'NOT met'}); "
         f"admission control without the interactive reserve: {ratio_nr:.2f}x; without admission control: {ratio0:.2f}x.")
shed_b = delta('kvgate_admission_shed_total{rule="chat",class="batch"}')
shed_i = delta('kvgate_admission_shed_total{rule="chat",class="interactive"}')
L.append(f"- **Batch shed with 429**: {lb['errors_by_class'].get('http_4xx', 0)} batch requests answered 4xx at the client; "
         f"the gateway counted {shed_b:.0f} batch and {shed_i:.0f} interactive requests shed by admission control "
         "(`kvgate_admission_shed_total`, warm-up included).")
for cls in ("interactive", "batch"):
    cnt = delta(f'kvgate_admission_wait_seconds_count{{rule="chat",class="{cls}"}}')
    le = {}
    for k in after:
        mm = re.match(r'kvgate_admission_wait_seconds_bucket\{rule="chat",class="%s",le="([^"]+)"\}' % cls, k)
        if mm:
            le[mm.group(1)] = delta(k)
    bound = float(max_wait_ms) / 1000.0
    within = max((v for b, v in le.items() if b != "+Inf" and float(b) <= bound + 1e-9), default=0.0)
    below = [b for b in le if b != "+Inf" and float(b) < bound]
    first_le = min(below, key=float, default=None)
    L.append(f"- **Waits, {cls}**: {cnt:.0f} requests left the queue (dispatched or shed); {within:.0f} of them within "
             f"le=\"{bound:g}\" s (admission.max_wait_ms = {max_wait_ms}): "
             f"{'no request waited longer than max_wait_ms' if within == cnt else 'SOME WAITED LONGER'}. Buckets: "
             + ", ".join(f"≤{b}: {v:.0f}" for b, v in sorted(le.items(), key=lambda kv: float('inf') if kv[0] == '+Inf' else float(kv[0]))
                         if b == '+Inf' or float(b) >= 0.005))
for label, a, b in (("with reserve", after, before), ("without reserve", nr_after, nr_before)):
    over = sum(delta(f'kvgate_admission_overdue_total{{rule="chat",class="{c}"}}', a, b) for c in ("interactive", "standard", "batch"))
    longest = max(a.get(f'kvgate_admission_wait_max_seconds{{rule="chat",class="{c}"}}', 0.0) for c in ("interactive", "standard", "batch"))
    L.append(f"- **Longest wait in the queue, {label}**: {longest*1000:.1f} ms (bound {max_wait_ms} ms); requests that left the "
             f"queue after the bound (`kvgate_admission_overdue_total`): {over:.0f}.")
L.append("")
L.append("Gateway admission metrics at the end of the loaded run (cumulative, warm-up included):\n")
L.append("```")
for k, v in sorted(after.items()):
    if (k.startswith("kvgate_admission_") and "_bucket" not in k) or k.startswith("kvgate_shed_total"):
        L.append(f"{k} {v:g}")
L.append("```")
with open(out, "w") as f:
    f.write("\n".join(L) + "\n")
print("\n".join(L))
PY
echo "wrote $OUT" >&2
