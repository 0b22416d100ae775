#!/usr/bin/env bash
# End-to-end KV ingest across processes (issue #12 item 5): a publisher JVM (JeroMQ PUB, vLLM-shaped batches of
# BlockStored events of 16-64 blocks) and a gateway-side JVM (the real KvEventIngest thread into the off-heap index)
# on loopback. Prints block ops/s applied, each process's CPU (cores), and the ratio to the in-process
# decode + apply rate measured by the ingest JVM right after.
# Usage: perf/ingest-e2e.sh [seconds=10] [publisher ops/s, 0 = unpaced] [port=26100]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JDK="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
SECONDS_RUN="${1:-10}"
RATE="${2:-0}"
PORT="${3:-26100}"
if [ -z "${KVGATE_JMH_NO_BUILD:-}" ]; then
  (cd "$ROOT" && ./mvnw -q -B -DskipTests package -pl perf -am) >&2
fi
CP="$ROOT/perf/target/kvgate-perf.jar:$ROOT/perf/target/lib/*"
echo "date: $(date -u +%FT%TZ)  nproc: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
SINK_OUT="$(mktemp)"
"$JDK/bin/java" @"$ROOT/deploy/jvm.options" -cp "$CP" io.kvgate.perf.ingest.IngestE2e ingest "$PORT" "$SECONDS_RUN" \
  > "$SINK_OUT" 2>&1 &
SINK=$!
# On a loaded machine the ingest JVM (index allocation, JIT) can take seconds to start: publish only once it is up.
for _ in $(seq 600); do grep -q '^ingest: ready' "$SINK_OUT" && break; sleep 0.1; done
"$JDK/bin/java" @"$ROOT/deploy/jvm.options" -cp "$CP" io.kvgate.perf.ingest.IngestE2e publish "$PORT" \
  "$((SECONDS_RUN + 2))" "$RATE"
wait "$SINK" || true
grep -v '^ingest: ready' "$SINK_OUT" | grep -v SLF4J
rm -f "$SINK_OUT"
