#!/usr/bin/env bash
# Endpoint-picker cost and added latency (#42 "Numbers"): kvgate in EPP mode (epp_listen) driven by the Envoy emulator
# (`./kvgate epp-check --load`) at each of RATES req/s with PROMPT_BYTES-byte chat prompts, every prompt distinct (each
# one rendered with the model's chat template, tokenized and looked up in full). The engines' answers are scripted by
# the emulator, so what is timed is the picker alone:
#   request phase  = the ext_proc round trip of the request: first message sent -> last piece of the echoed body
#                    received (the decision plus the echo of every byte). Envoy holds the request for exactly this
#                    long before it can forward it: it IS the picker's added latency;
#   response phase = the round trips of the response's headers and body pieces through the picker, summed;
#   CPU            = the picker's user+system time over the measured window (/proc/PID/stat), in cores and per 100 req/s
#                    achieved; the emulator's CPU likewise (near 1 core = the load generator, not the picker, capped it).
# Rows, one policy after the other on the same engines:
#   noop        a no-op ext_proc server (io.kvgate.perf.epp.NoopPicker: buffer, fixed destination, echo; no parse, no
#               prompt, no routing): the emulator's and gRPC's own floor on these cores;
#   round_robin kvgate with no prompt work (the request stages, routing, the protocol);
#   kv_exact    kvgate with the real Qwen3 tokenizer and chat template (the whole prompt path).
# "over no-op" subtracts the no-op row's percentile at the same rate: what kvgate's stages add beyond any picker's floor.
# Pinning (PIN=1, the default when taskset exists and there are 2+ cores): the picker on PICKER_CPUS, the emulator and
# the two simulated engines (idle: their answers are scripted) on LOAD_CPUS, so the load generator does not take the
# picker's core (last time the emulator on the same cores capped 500 req/s at 198). A picker JVM pinned to one core
# sizes itself to it (one I/O loop, the router on it).
# Loopback only; bounded: about POLICIES x (WARMUP + RATES x (DURATION + 5)) seconds plus start-up.
#
#   perf/epp-picker.sh                                               # defaults below; env vars override
#   RATES=100 DURATION=5 WARMUP=2 perf/epp-picker.sh                 # a quick end-to-end check
#   POLICIES=kv_exact RATES="100 200 300 400 500" perf/epp-picker.sh # where kv_exact saturates its core
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=epp-picker
. "$ROOT/perf/fleet-common.sh"
OUT="${OUT:-$ROOT/perf/results/epp-picker-$DATE.md}"
RATES="${RATES:-${RATE:-100 250 500}}"
POLICIES="${POLICIES:-noop round_robin kv_exact}"
DURATION="${DURATION:-20}"
WARMUP="${WARMUP:-10}"
PROMPT_BYTES="${PROMPT_BYTES:-100000}"
CONNECTIONS="${CONNECTIONS:-4}"
PICKER_CPUS="${PICKER_CPUS:-1}"
LOAD_CPUS="${LOAD_CPUS:-0}"
if [ -z "${PIN:-}" ]; then
  if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then PIN=1; else PIN=0; fi
fi
pin() { # pin CPUS CMD... : exec CMD on those cores when pinning (in `start`'s subshell or a `&` job: the recorded PID
         # is then the JVM itself, whose /proc/PID/stat the CPU figures read; taskset execs it in turn)
  local cpus="$1"; shift
  if [ "$PIN" = 1 ]; then exec taskset -c "$cpus" "$@"; else exec "$@"; fi
}
[ -f "$ROOT/perf/target/kvgate-perf.jar" ] || { echo "build first: ./mvnw -o -q -B -DskipTests package -pl perf,tools -am" >&2; exit 1; }

P_ENGINE() { echo $((PORT_BASE + $1)); }
P_KV() { echo $((PORT_BASE + 20 + $1)); }
P_GW=$((PORT_BASE + 41)); P_ADMIN=$((PORT_BASE + 42)); P_EPP=$((PORT_BASE + 43))

EPS=""
for i in 1 2; do
  start "sim$i" pin "$LOAD_CPUS" "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
    -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main \
    sim --dialect vllm --port "$(P_ENGINE "$i")" --model qwen3 --seed "$i" --context-len 262144 \
    --kv-events "tcp://127.0.0.1:$(P_KV "$i")" --kv-events-mode bind --block-size 16 --hash-seed 0
  EPS="$EPS      - url: http://127.0.0.1:$(P_ENGINE "$i")
        kv_events: tcp://127.0.0.1:$(P_KV "$i")
"
done
for i in 1 2; do wait_http "sim$i" "$(P_ENGINE "$i")"; done

gateway_yaml() { # gateway_yaml POLICY
  cat <<YAML
listen: 127.0.0.1:$P_GW
admin_listen: 127.0.0.1:$P_ADMIN
epp_listen: 127.0.0.1:$P_EPP
control_socket: "off"
health: {interval_ms: 1000}
limits: {max_body_bytes: 4194304}
rules:
  - name: chat
    models: [qwen3]
    engine: vllm
    policy: $1
    tokenizer: $ROOT/deploy/models/qwen3
    block_size: 16
    hash_seed: "0"
    endpoints:
$EPS
YAML
}

# GW_JAVA_OPTS: JVM options for the picker alone (e.g. a JFR recording: -XX:StartFlightRecording=...).
gw_kv() { pin "$PICKER_CPUS" "$JAVA_HOME/bin/java" \
  @"$ROOT/deploy/jvm.options" $(kvgate_host_jvm_options) ${GW_JAVA_OPTS:-} ${KVGATE_JAVA_OPTS:-} -Dkvgate.home="$ROOT" \
  -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main "$@"; }
noop_picker() { pin "$PICKER_CPUS" "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" ${GW_JAVA_OPTS:-} \
  -cp "$ROOT/perf/target/kvgate-perf.jar:$ROOT/perf/target/lib/*" io.kvgate.perf.epp.NoopPicker "$@"; }

wait_port() { # wait_port NAME PORT : until something accepts on PORT (bounded: 60 s)
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  echo "$1 (port $2) did not listen within 60 s; log:" >&2; tail -30 "$WORK/$1.log" >&2; exit 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

load() { # load LABEL RATE SECONDS : epp-check --load on LOAD_CPUS, JSON in $WORK/LABEL.json, its CPU in $WORK/LABEL.cpu
  local limit=$(( ${3%.*} + 120 )) pid wd
  pin "$LOAD_CPUS" "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
    -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main epp-check \
    --target "127.0.0.1:$P_EPP" --model qwen3 --load --rate "$2" --seconds "$3" --prompt-bytes "$PROMPT_BYTES" \
    --connections "$CONNECTIONS" --timeout-ms 30000 >"$WORK/$1.json" 2>"$WORK/$1.err" &
  pid=$!
  ( sleep "$limit"; kill "$pid" 2>/dev/null ) &
  wd=$!
  # The emulator's CPU from 3 s in (past its JVM start and its unmeasured warm-up exchanges), sampled while it runs.
  sleep 3
  local first="" last="" now
  while kill -0 "$pid" 2>/dev/null; do
    now="$(cpu_ticks "$pid") $(date +%s.%N)"
    [ -n "$first" ] || first="$now"
    case "$now" in 0\ *) ;; *) last="$now" ;; esac
    sleep 0.5
  done
  wait "$pid" || true
  kill "$wd" 2>/dev/null || true; wait "$wd" 2>/dev/null || true
  echo "${first:-0 0} ${last:-0 0}" >"$WORK/$1.cpu"
  log "$1: $(cat "$WORK/$1.json") $(head -3 "$WORK/$1.err" | tr '\n' ' ')"
}

HZ="$(getconf CLK_TCK)"
: >"$WORK/cpu.txt"
for policy in $POLICIES; do
  if [ "$policy" = noop ]; then
    start "picker-noop" noop_picker "127.0.0.1:$P_EPP" "127.0.0.1:$(P_ENGINE 1)"
    wait_port "picker-noop" "$P_EPP"
    pid="$PID_picker_noop"
  else
    gateway_yaml "$policy" >"$WORK/$policy.yaml"
    start "picker-$policy" gw_kv serve --config "$WORK/$policy.yaml"
    wait_http "picker-$policy" "$P_GW" /ready/engines
    var="PID_picker_${policy}"; pid="${!var}"
  fi
  load "warmup-$policy" "${RATES%% *}" "$WARMUP"
  for rate in $RATES; do
    LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
    t0="$(cpu_ticks "$pid")"; s0="$(date +%s.%N)"
    load "$policy-$rate" "$rate" "$DURATION"
    t1="$(cpu_ticks "$pid")"; s1="$(date +%s.%N)"
    echo "$policy $rate $(( t1 - t0 )) $s0 $s1 $LOAD_START $(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/cpu.txt"
  done
  stop "picker-$policy"
done

python3 - "$WORK" "$OUT" "$DATE" "$(machine)" "$RATES" "$DURATION" "$WARMUP" "$PROMPT_BYTES" "$CONNECTIONS" "$HZ" \
  "$PIN" "$PICKER_CPUS" "$LOAD_CPUS" "$POLICIES" <<'PY'
import json, os, sys
work, out, date, machine, rates, duration, warmup, prompt, conns, hz, pin, picker_cpus, load_cpus, policies = sys.argv[1:15]
hz = float(hz)
rows = [l.split() for l in open(os.path.join(work, "cpu.txt")) if l.strip()]
results = {}
for p in rows:
    policy, rate = p[0], p[1]
    label = f"{policy}-{rate}"
    try:
        r = json.load(open(os.path.join(work, label + ".json")))
    except Exception:
        r = None
    c = open(os.path.join(work, label + ".cpu")).read().split()
    load_cores = ((float(c[2]) - float(c[0])) / hz / (float(c[3]) - float(c[1]))) if float(c[3]) > float(c[1]) else float("nan")
    results[(policy, rate)] = (r, int(p[2]) / hz, float(p[4]) - float(p[3]), " ".join(p[5:8]), " ".join(p[8:11]), load_cores, label)
pinning = (f"pinned with taskset: picker on CPU {picker_cpus}, emulator and engines on CPU {load_cpus}" if pin == "1"
           else "not pinned: the emulator shares the picker's cores")
L = [f"# Endpoint picker (EPP mode): cost and added latency — {date}\n",
     f"Machine: {machine}. {pinning}.\n",
     f"Command: `perf/epp-picker.sh` (POLICIES=\"{policies}\" RATES=\"{rates}\" DURATION={duration} WARMUP={warmup} "
     f"PROMPT_BYTES={prompt} CONNECTIONS={conns}): `./kvgate serve` with `epp_listen`, two `./kvgate sim --dialect vllm "
     "--model qwen3` engines (KV events), driven by `./kvgate epp-check --load` (the Envoy emulator: FULL_DUPLEX_STREAMED, "
     "64 KiB request pieces, scripted engine answers), open loop, every prompt distinct. Added latency = the request's "
     "ext_proc round trip (first message -> last echoed body piece: how long Envoy holds the request); `noop` = a picker "
     "doing only the protocol (the emulator's and gRPC's floor); \"over no-op\" = the row's percentile minus the no-op's at "
     "the same rate.\n",
     "| picker | offered req/s | sent | ok | failed | missed | achieved req/s | added latency p50 / p90 / p99 / max ms "
     "| over no-op p50 / p99 ms | response phase p99 ms | picker CPU (cores) | CPU ms per request | cores per 100 req/s "
     "| emulator CPU (cores) | load avg start -> end |",
     "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for (policy, rate), (r, secs, wall, la0, la1, load_cores, label) in results.items():
    name = "no-op" if policy == "noop" else f"kvgate `{policy}`"
    if r is None:
        L.append(f"| {name} | {rate} | run failed: {open(os.path.join(work, label + '.err')).read()[:200]!r} |")
        continue
    cores = secs / wall
    per100 = cores / (r["achieved_per_s"] / 100) if r["achieved_per_s"] > 0 else float("nan")
    q = r["request_phase_us"]
    base = results.get(("noop", rate))
    if policy != "noop" and base and base[0]:
        b = base[0]["request_phase_us"]
        over = f"{(q['p50'] - b['p50'])/1000:.2f} / {(q['p99'] - b['p99'])/1000:.2f}"
    else:
        over = "-"
    L.append(f"| {name} | {rate} | {r['started'] + r['missed']} | {r['ok']} | {r['failed']} | {r['missed']} | "
             f"{r['achieved_per_s']:.0f} | {q['p50']/1000:.2f} / {q['p90']/1000:.2f} / {q['p99']/1000:.2f} / {q['max']/1000:.2f} | "
             f"{over} | {r['response_phase_us']['p99']/1000:.2f} | {cores:.2f} | {secs * 1000 / max(1, r['ok']):.2f} | "
             f"{per100:.3f} | {load_cores:.2f} | {la0} -> {la1} |")
L += ["", "Reading it: a picker row whose achieved rate is below the offered one, or whose picker CPU is near the "
      "cores it is pinned to, is saturated (its latencies are then its queue); an emulator near 1.00 core means the load "
      "generator capped the rate, not the picker.",
      "", "llm-d's published figure for its picker (vLLM render sidecar tokenizing): 0.5-1 core per req/s for 100k-token "
      "prompts, i.e. 50-100 cores per 100 req/s. The rows above are 100 KB prompts (about 25k Qwen3 tokens of English "
      "text); a 100k-token prompt is about 4x the bytes and the prompt stage's work scales with its length."]
with open(out, "w") as fh:
    fh.write("\n".join(L) + "\n")
print("\n".join(L))
PY
log "wrote $OUT"
