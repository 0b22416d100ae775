#!/usr/bin/env bash
# Endpoint-picker cost (#42 "Numbers"): kvgate in EPP mode (epp_listen) driven by the Envoy emulator
# (`./kvgate epp-check --load`) at RATE req/s with PROMPT_BYTES-byte chat prompts, every prompt distinct (each one
# rendered with the model's chat template, tokenized and looked up in full). The engines' answers are scripted by the
# emulator, so what is timed is the picker alone:
#   request phase  = first ext_proc message sent -> last piece of the echoed body received (the decision plus the echo
#                    of every byte: what Envoy waits for before it can forward the request);
#   response phase = the round trips of the response's headers and body pieces through the picker, summed;
#   CPU            = the gateway process's user+system time over the measured window (/proc/PID/stat), in cores, and
#                    per 100 req/s achieved.
# Two rows, one after the other on the same engines: `kv_exact` with the real Qwen3 tokenizer and chat template (the
# whole prompt path), and `round_robin` (no prompt work: the picker's protocol floor). The emulator runs on the same
# host and competes for the same cores. Loopback only; bounded (~2 x (WARMUP + DURATION) + start-up).
#
#   perf/epp-picker.sh                                        # defaults below; env vars override
#   RATE=100 DURATION=5 WARMUP=2 perf/epp-picker.sh           # a quick end-to-end check
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=epp-picker
. "$ROOT/perf/fleet-common.sh"
OUT="${OUT:-$ROOT/perf/results/epp-picker-$DATE.md}"
RATE="${RATE:-500}"
DURATION="${DURATION:-20}"
WARMUP="${WARMUP:-10}"
PROMPT_BYTES="${PROMPT_BYTES:-100000}"
CONNECTIONS="${CONNECTIONS:-4}"

P_ENGINE() { echo $((PORT_BASE + $1)); }
P_KV() { echo $((PORT_BASE + 20 + $1)); }
P_GW=$((PORT_BASE + 41)); P_ADMIN=$((PORT_BASE + 42)); P_EPP=$((PORT_BASE + 43))

EPS=""
for i in 1 2; do
  start "sim$i" kv sim --dialect vllm --port "$(P_ENGINE "$i")" --model qwen3 --seed "$i" --context-len 262144 \
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

# GW_JAVA_OPTS: JVM options for the gateway alone (e.g. a JFR recording: -XX:StartFlightRecording=...).
gw_kv() { KVGATE_JAVA_OPTS="${GW_JAVA_OPTS:-} ${KVGATE_JAVA_OPTS:-}" kv "$@"; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

load() { # load LABEL SECONDS : epp-check --load, JSON in $WORK/LABEL.json
  timeout $(( ${2%.*} + 120 )) "$JAVA_HOME/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
    -cp "$ROOT/tools/target/kvgate-tools.jar:$ROOT/tools/target/lib/*" io.kvgate.tools.Main epp-check \
    --target "127.0.0.1:$P_EPP" --model qwen3 --load --rate "$RATE" --seconds "$2" --prompt-bytes "$PROMPT_BYTES" \
    --connections "$CONNECTIONS" --timeout-ms 30000 >"$WORK/$1.json" 2>"$WORK/$1.err" || true
  log "$1: $(cat "$WORK/$1.json") $(head -3 "$WORK/$1.err" | tr '\n' ' ')"
}

HZ="$(getconf CLK_TCK)"
for policy in kv_exact round_robin; do
  gateway_yaml "$policy" >"$WORK/$policy.yaml"
  start "gw-$policy" gw_kv serve --config "$WORK/$policy.yaml"
  wait_http "gw-$policy" "$P_GW" /ready/engines
  var="PID_gw_${policy}"; pid="${!var}"
  load "warmup-$policy" "$WARMUP"
  LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
  t0="$(cpu_ticks "$pid")"; s0="$(date +%s.%N)"
  load "$policy" "$DURATION"
  t1="$(cpu_ticks "$pid")"; s1="$(date +%s.%N)"
  echo "$policy $(( t1 - t0 )) $s0 $s1 $LOAD_START $(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/cpu.txt"
  stop "gw-$policy"
done

python3 - "$WORK" "$OUT" "$DATE" "$(machine)" "$RATE" "$DURATION" "$WARMUP" "$PROMPT_BYTES" "$CONNECTIONS" "$HZ" <<'PY'
import json, os, sys
work, out, date, machine, rate, duration, warmup, prompt, conns, hz = sys.argv[1:11]
hz = float(hz)
cpu = {}
for line in open(os.path.join(work, "cpu.txt")):
    p = line.split()
    cpu[p[0]] = (int(p[1]) / hz, float(p[3]) - float(p[2]), " ".join(p[4:7]), " ".join(p[7:10]))
L = [f"# Endpoint-picker (EPP mode) cost — {date}\n",
     f"Machine: {machine}. The emulator (load generator) shares these cores with the gateway.\n",
     f"Command: `perf/epp-picker.sh` (RATE={rate} DURATION={duration} WARMUP={warmup} PROMPT_BYTES={prompt} "
     f"CONNECTIONS={conns}): `./kvgate serve` with `epp_listen`, two `./kvgate sim --dialect vllm --model qwen3` engines "
     "(KV events), driven by `./kvgate epp-check --load` (the Envoy emulator: FULL_DUPLEX_STREAMED, 64 KiB request "
     "pieces, scripted engine answers), open loop, every prompt distinct. Request phase = first ext_proc message -> last "
     "echoed body piece (decision + echo of every byte); response phase = the answer's round trips through the picker.\n",
     "| rule | sent | ok | failed | missed | achieved req/s | request phase p50 / p90 / p99 / max ms | response phase p99 ms "
     "| gateway CPU (cores) | CPU ms per request | cores per 100 req/s | load avg start -> end |",
     "|---|---|---|---|---|---|---|---|---|---|---|---|"]
for policy in ("kv_exact", "round_robin"):
    try:
        r = json.load(open(os.path.join(work, policy + ".json")))
    except Exception as e:
        L.append(f"| {policy} | run failed: {open(os.path.join(work, policy + '.err')).read()[:200]!r} |")
        continue
    secs, wall, la0, la1 = cpu[policy]
    cores = secs / wall
    per100 = cores / (r["achieved_per_s"] / 100) if r["achieved_per_s"] > 0 else float("nan")
    q = r["request_phase_us"]
    L.append(f"| `{policy}` | {r['started'] + r['missed']} | {r['ok']} | {r['failed']} | {r['missed']} | {r['achieved_per_s']:.0f} | "
             f"{q['p50']/1000:.2f} / {q['p90']/1000:.2f} / {q['p99']/1000:.2f} / {q['max']/1000:.2f} | "
             f"{r['response_phase_us']['p99']/1000:.2f} | {cores:.2f} | {secs * 1000 / max(1, r['started']):.1f} | {per100:.3f} | {la0} -> {la1} |")
L += ["", "llm-d's published figure for its picker (vLLM render sidecar tokenizing): 0.5-1 core per req/s for 100k-token "
      "prompts, i.e. 50-100 cores per 100 req/s. The rows above are 100 KB prompts (about 25k Qwen3 tokens of English "
      "text); a 100k-token prompt is about 4x the bytes and the prompt stage's work scales with its length."]
with open(out, "w") as fh:
    fh.write("\n".join(L) + "\n")
print("\n".join(L))
PY
log "wrote $OUT"
