#!/usr/bin/env bash
# Is the load generator the bottleneck? One run, on one machine:
#   1. nginx (one worker) pinned to core SERVER_CPU returns a fixed chat-completion body;
#   2. wrk pinned to core CLIENT_CPU saturates it (POST of the same 1 KiB body, keep-alive);
#   3. ./kvgate bench --closed-loop pinned to CLIENT_CPU saturates it the same way;
#   4. ./kvgate bench open loop at fixed rates (OPEN_RATES): is the offered rate delivered on time?
# Writes perf/results/bench-overhead-<date>.md (machine, both saturation numbers, their ratio, the open-loop check).
#
#   perf/bench-overhead.sh                 # defaults below; env vars override
#   DURATION=20 CONNECTIONS=128 perf/bench-overhead.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATE="${DATE:-2026-11-30}"
OUT="${OUT:-$ROOT/perf/results/bench-overhead-$DATE.md}"
PORT="${PORT:-18080}"
SERVER_CPU="${SERVER_CPU:-0}"
CLIENT_CPU="${CLIENT_CPU:-1}"
DURATION="${DURATION:-15}"
WARMUP="${WARMUP:-10}"
CONNECTIONS="${CONNECTIONS:-64}"
PAYLOAD_BYTES="${PAYLOAD_BYTES:-1024}"
# On a machine shared with other jobs, PRIO="nice -n -15" (root) gives the server and both clients the same raised
# CPU priority so the neighbours' load does not decide the numbers; empty = normal priority.
PRIO="${PRIO:-}"
# Open loop: enough connections that a slow moment of the server does not stop the generator from sending on time.
OPEN_LIMIT="${OPEN_LIMIT:-4000}"
ulimit -n 65536 2>/dev/null || true

need() { command -v "$1" >/dev/null 2>&1; }
if ! need nginx || ! need wrk || ! need taskset || [ ! -x /usr/bin/time ]; then
  echo "installing nginx, wrk, util-linux (taskset)..." >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q nginx wrk util-linux time python3 >/dev/null
fi
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"

WORK="$(mktemp -d /tmp/kvgate-bench-overhead.XXXXXX)"
NGINX_PID=""
cleanup() {
  if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then kill "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# The response a non-streaming chat completion would get (with usage, so the generator validates and counts it).
BODY='{"id":"cmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":200,"completion_tokens":1,"total_tokens":201,"prompt_tokens_details":{"cached_tokens":0}}}'
mkdir -p "$WORK/logs"
cat > "$WORK/nginx.conf" <<NGINX
daemon off;
master_process off;
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/logs/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 120s;
  client_body_buffer_size 64k;
  server {
    listen 127.0.0.1:$PORT reuseport backlog=4096;
    location / {
      default_type application/json;
      return 200 '$BODY';
    }
  }
}
NGINX
# master_process off: one process doing the work, so "pinned to one core" is exact.
$PRIO taskset -c "$SERVER_CPU" "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" &
NGINX_PID=$!
for _ in $(seq 1 50); do
  if (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; then break; fi
  sleep 0.1
done
(exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null || { echo "nginx did not start; see $WORK/logs/error.log" >&2; cat "$WORK/logs/error.log" >&2; exit 1; }

# The request body both clients send: exactly what kvgate bench --workload fixed --payload-bytes sends.
python3 - "$PAYLOAD_BYTES" > "$WORK/body.json" <<'PY'
import json, sys
n = int(sys.argv[1])
empty = json.dumps({"model": "m", "messages": [{"role": "user", "content": ""}], "max_tokens": 128, "stream": False}, separators=(",", ":"))
print(json.dumps({"model": "m", "messages": [{"role": "user", "content": "a" * (n - len(empty))}], "max_tokens": 128, "stream": False}, separators=(",", ":")), end="")
PY
cat > "$WORK/post.lua" <<LUA
local f = io.open("$WORK/body.json", "rb")
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
LUA

echo "== building kvgate (if needed)" >&2
"$ROOT/kvgate" bench --help >/dev/null

# Two interleaved rounds (wrk, kvgate, wrk, kvgate) so a noisy neighbour hurts both clients alike.
ROUNDS="${ROUNDS:-2}"
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r: wrk ${DURATION}s (+${WARMUP}s warmup), $CONNECTIONS connections, 1 thread, CPU $CLIENT_CPU" >&2
  $PRIO taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" -s "$WORK/post.lua" "http://127.0.0.1:$PORT/v1/chat/completions" >/dev/null
  /usr/bin/time -f "cpu_s %U %S" -o "$WORK/wrk$r.time" $PRIO taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" \
    --latency -s "$WORK/post.lua" "http://127.0.0.1:$PORT/v1/chat/completions" > "$WORK/wrk$r.txt"
  cat "$WORK/wrk$r.txt" >&2
  echo "== round $r: kvgate bench --closed-loop ${DURATION}s (+${WARMUP}s warmup), $CONNECTIONS connections, CPU $CLIENT_CPU" >&2
  $PRIO taskset -c "$CLIENT_CPU" "$ROOT/kvgate" bench --target "http://127.0.0.1:$PORT" --model m --workload fixed \
    --payload-bytes "$PAYLOAD_BYTES" --closed-loop --connections "$CONNECTIONS" --duration "$DURATION" --warmup "$WARMUP" \
    --out "$WORK/closed$r.json" > "$WORK/closed$r.txt" 2>&1
  cat "$WORK/closed$r.txt" >&2
done

# Per round: requests/s, and CPU microseconds per request (wrk: whole process incl. warmup-free run; kvgate: whole
# JVM over the measured window, GC and JIT included), from which a one-core capacity = 1e6 / (us per request).
python3 - "$WORK" "$ROUNDS" > "$WORK/sat.tsv" <<'PY'
import json, re, sys
work, rounds = sys.argv[1], int(sys.argv[2])
for r in range(1, rounds + 1):
    txt = open(f"{work}/wrk{r}.txt").read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", txt).group(1))
    n = int(re.search(r"(\d+) requests in", txt).group(1))
    lat = dict(re.findall(r"^\s+(50|99)%\s+(\S+)", txt, re.M))
    u, s = map(float, open(f"{work}/wrk{r}.time").read().split()[1:3])
    wus = (u + s) * 1e6 / n
    k = json.load(open(f"{work}/closed{r}.json"))
    g = k["generator"]
    print("\t".join(str(x) for x in [r, round(rps), f"{wus:.1f}", lat.get("50", "?"), lat.get("99", "?"),
          round(k["achieved_rps"]), k["errors"], g["process_cpu_us_per_request"], g["io_thread_busy"],
          k["latency_ms"]["p50"], k["latency_ms"]["p99"]]))
PY
cat "$WORK/sat.tsv" >&2
BEST_WRK="$(cut -f2 "$WORK/sat.tsv" | sort -n | tail -n1)"
BEST_KV="$(cut -f6 "$WORK/sat.tsv" | sort -n | tail -n1)"
RATIO="$(python3 -c "print(f'{$BEST_KV / $BEST_WRK:.2f}')")"
KV_US="$(cut -f8 "$WORK/sat.tsv" | sort -n | head -n1)"
WRK_US="$(cut -f3 "$WORK/sat.tsv" | sort -n | head -n1)"
KV_CAP="$(python3 -c "print(round(1e6 / $KV_US))")"
WRK_CAP="$(python3 -c "print(round(1e6 / $WRK_US))")"

# Open loop at fixed rates (default: a quarter, a half and all of wrk's best saturation rate, and 20 000 req/s):
# is the offered rate delivered on time? Late sends with free connections would be the generator's fault;
# waits at the connection limit mean the server did not keep up.
OPEN_RATES="${OPEN_RATES:-$(python3 -c "b=$BEST_WRK; print(' '.join(str(max(100, int(x / 100) * 100)) for x in (b / 4, b / 2, b, 20000)))")}"
: > "$WORK/open.tsv"
for rate in $OPEN_RATES; do
  echo "== kvgate bench open loop: $rate req/s Poisson, ${DURATION}s (+${WARMUP}s warmup), CPU $CLIENT_CPU" >&2
  $PRIO taskset -c "$CLIENT_CPU" "$ROOT/kvgate" bench --target "http://127.0.0.1:$PORT" --model m --workload fixed \
    --payload-bytes "$PAYLOAD_BYTES" --rate "$rate" --arrival poisson --duration "$DURATION" --warmup "$WARMUP" \
    --concurrency-limit "$OPEN_LIMIT" --drain 10 --out "$WORK/open$rate.json" > "$WORK/open$rate.txt" 2>&1
  grep -v SLF4J "$WORK/open$rate.txt" | tail -n 12 >&2
  python3 -c '
import json,sys; r=json.load(open(sys.argv[1])); s=r["schedule"]; g=r["generator"]
l=r["latency_ms"] or {"p50": "n/a", "p99": "n/a", "p999": "n/a"}
print("\t".join(str(x) for x in [r["offered_rps"], r["sent_rps"], r["on_time_rps"], r["achieved_rps"], r["errors"],
      s["late_sends"], s["max_lag_ms"], s["connection_limit_waits"], r["unsent"], l["p50"], l["p99"], l["p999"],
      g["io_thread_busy"]]))' "$WORK/open$rate.json" >> "$WORK/open.tsv"
done

JDK="$("${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}/bin/java" -version 2>&1 | head -n1)"
mkdir -p "$(dirname "$OUT")"
{
  echo "# Load-generator overhead: kvgate bench vs wrk at saturation, $DATE"
  echo
  echo "Machine (run $(date -u '+%Y-%m-%d %H:%M UTC')):"
  echo
  echo '```'
  lscpu | grep 'Model name' || true
  echo "nproc: $(nproc)"
  free -g | head -n2
  echo "kernel: $(uname -r)"
  echo "JDK: $JDK"
  echo "nginx: $("$NGINX" -v 2>&1)"
  echo "wrk: $(wrk -v 2>&1 | head -n1)"
  echo '```'
  echo
  echo "Setup: nginx, one process (\`master_process off\`, \`worker_processes 1\`), pinned to CPU $SERVER_CPU, answers"
  echo "every POST with a fixed $(printf %s "$BODY" | wc -c)-byte chat completion (\`return 200\`). Each client, pinned to CPU"
  echo "$CLIENT_CPU, POSTs the same $PAYLOAD_BYTES-byte chat request over $CONNECTIONS keep-alive connections for ${DURATION} s after"
  echo "${WARMUP} s of warm-up. wrk: 1 thread. kvgate bench: one Netty event-loop thread (the JVM's GC and JIT threads"
  echo "share the same core), and it also parses and validates every response body as JSON and records it in"
  echo "HdrHistograms; wrk only counts bytes. Command: \`perf/bench-overhead.sh\` (DURATION=$DURATION WARMUP=$WARMUP"
  echo "CONNECTIONS=$CONNECTIONS ROUNDS=$ROUNDS PRIO='$PRIO': server and clients run at that priority)."
  echo
  echo "Load on the machine while this ran (other jobs share these 2 cores): \`$(cat /proc/loadavg)\` at the end."
  echo
  echo "## Saturation (closed loop, one client core)"
  echo
  echo "| round | wrk req/s | wrk CPU us/req | wrk p50 | wrk p99 | kvgate req/s | kvgate errors | kvgate CPU us/req (whole JVM) | kvgate I/O thread busy | kvgate p50 ms | kvgate p99 ms |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  while IFS=$'\t' read -r a b c d e f g h i j k; do
    echo "| $a | $b | $c | $d | $e | $f | $g | $h | $i | $j | $k |"
  done < "$WORK/sat.tsv"
  echo
  echo "**Ratio kvgate bench / wrk (best round each) = $RATIO** ($BEST_KV vs $BEST_WRK requests/s)."
  echo
  echo "CPU cost per request (lowest round): wrk $WRK_US us, kvgate bench $KV_US us (whole JVM: I/O thread, GC, JIT,"
  echo "JSON validation, histograms) => one-core capacity ~$WRK_CAP req/s for wrk, ~$KV_CAP req/s for kvgate bench."
  echo "Goal: >= 20 000 requests/s on one core for kvgate bench."
  echo
  echo "## Open loop at fixed rates (Poisson, concurrency limit $OPEN_LIMIT)"
  echo
  echo "| offered req/s | sent req/s | sent on time req/s | achieved req/s | errors | late sends (>10 ms) | max lag ms | limit waits | unsent | p50 ms | p99 ms | p99.9 ms | I/O thread busy |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  while IFS=$'\t' read -r a b c d e f g h i j k l m; do
    echo "| $a | $b | $c | $d | $e | $f | $g | $h | $i | $j | $k | $l | $m |"
  done < "$WORK/open.tsv"
  echo
  echo "Latencies are from each request's intended start on the Poisson timeline, so any lag of the generator is"
  echo "inside them. Late sends while connections are free would be the generator's fault; waits at the connection"
  echo "limit mean the server (one nginx process on a shared core) did not keep up with the offered rate."
  echo
  echo "## Raw output"
  echo
  for r in $(seq 1 "$ROUNDS"); do
    echo '```'
    cat "$WORK/wrk$r.txt"
    echo '```'
    echo
    echo '```'
    grep -v SLF4J "$WORK/closed$r.txt" | grep -v '^bench .* [0-9]*s  sent'
    echo '```'
    echo
  done
  echo
  for rate in $OPEN_RATES; do
    echo '```'
    grep -v SLF4J "$WORK/open$rate.txt" | grep -v '^bench .* [0-9]*s  sent' | tail -n 14
    echo '```'
    echo
  done
} > "$OUT"
echo "wrote $OUT" >&2
echo "wrk $BEST_WRK req/s, kvgate bench $BEST_KV req/s (ratio $RATIO); CPU/request wrk $WRK_US us, kvgate $KV_US us (~$KV_CAP req/s per core)"
cut -f1,3,4 "$WORK/open.tsv" | sed 's/^/open loop offered, on time, achieved: /'
