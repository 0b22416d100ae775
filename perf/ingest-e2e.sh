#!/usr/bin/env bash
# End-to-end KV ingest across processes (issue #12 item 5): the simulator's own ZeroMQ publisher, a separate
# process (`./kvgate sim --dialect vllm --kv-flood RATE --kv-batch BATCH`: real vLLM BlockStored events of BATCH
# blocks, keyed with sha256_cbor, each 128-block prompt stored then removed), and the gateway side (IngestE2e: the
# real KvEventIngest thread into a 2 M-block off-heap index) on loopback. Prints the block ops/s applied, the
# simulator's offered rate and CPU, the ingest JVM's CPU (cores), and the ratio to the in-process decode + apply
# rate of the same payloads measured by the ingest JVM right after.
# The window starts WARMUP seconds (default 6) after the first block op arrives (the JIT's first seconds); the ingest
# JVM's CPU is broken down by thread. A RATE above what the ingest can take fills the publisher's queue and then
# drops batches there (gaps, clears): the applied rate is then the ingest's capacity.
# Usage: perf/ingest-e2e.sh [seconds=10] [flood block ops/s=1000000] [blocks per event=32] [port=26100] [warmup=3]
# KVGATE_INGEST_JAVA_OPTS: extra JVM options of the ingest JVM only (e.g. a JFR recording).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JDK="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
SECONDS_RUN="${1:-10}"
RATE="${2:-1000000}"
BATCH="${3:-32}"
PORT="${4:-26100}"
WARMUP="${5:-6}"
if [ -z "${KVGATE_JMH_NO_BUILD:-}" ]; then
  (cd "$ROOT" && ./mvnw -q -B -DskipTests package -pl perf -am) >&2
fi
CP="$ROOT/perf/target/kvgate-perf.jar:$ROOT/perf/target/lib/*"
echo "date: $(date -u +%FT%TZ)  nproc: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)  rate: $RATE  batch: $BATCH"
SINK_OUT="$(mktemp)"
SIM_OUT="$(mktemp)"
SINK=""
SIM=""
cleanup() {
  [ -n "$SIM" ] && kill "$SIM" 2>/dev/null || true
  [ -n "$SINK" ] && kill "$SINK" 2>/dev/null || true
  rm -f "$SINK_OUT" "$SIM_OUT"
}
trap cleanup EXIT
# shellcheck disable=SC2086
"$JDK/bin/java" @"$ROOT/deploy/jvm.options" ${KVGATE_INGEST_JAVA_OPTS:-} -cp "$CP" io.kvgate.perf.ingest.IngestE2e \
  ingest "$PORT" "$SECONDS_RUN" "$BATCH" "$WARMUP" > "$SINK_OUT" 2>&1 &
SINK=$!
# On a loaded machine the ingest JVM (index allocation, JIT) can take seconds to start: publish only once it is up.
for _ in $(seq 600); do grep -q '^ingest: ready' "$SINK_OUT" && break; sleep 0.1; done
# The flood outlasts the measurement (the ingest waits for ops to flow, then measures SECONDS) and prints its rate
# and CPU when it stops; the simulator is then stopped.
KVGATE_JAVA_OPTS="${KVGATE_JAVA_OPTS:-}" "$ROOT/kvgate" sim --dialect vllm --port 0 --host 127.0.0.1 \
  --kv-events "tcp://127.0.0.1:$PORT" --kv-events-mode bind \
  --kv-flood "$RATE" --kv-batch "$BATCH" --kv-flood-seconds "$((SECONDS_RUN + WARMUP + 10))" > "$SIM_OUT" 2>&1 &
SIM=$!
for _ in $(seq $(( (SECONDS_RUN + WARMUP + 60) * 10 ))); do grep -q '^kv flood:' "$SIM_OUT" && break; sleep 0.1; done
kill "$SIM" 2>/dev/null || true
wait "$SIM" 2>/dev/null || true
SIM=""
wait "$SINK" || true
SINK=""
grep '^kv flood:' "$SIM_OUT" | sed 's/^/simulator /' || { echo "simulator output:"; cat "$SIM_OUT"; }
grep -v '^ingest: ready' "$SINK_OUT" | grep -v SLF4J
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
