#!/usr/bin/env bash
# Block index + KV-event ingest performance, everything side by side in one go:
#   1. JMH: decode (own vs msgpack-core) and decode+apply, block operations/s, with -prof gc
#   2. JMH: 128-block / 64-endpoint lookup p50/p99 (shared binary search vs linear probing, reader cache on/off)
#   3. JMH: lookup idle vs while one thread ingests into the same index
#   4. bytes per (block, endpoint) membership at 10 M memberships
#   5. end to end on loopback: JeroMQ PUBs -> KvEventIngest -> index, with lookups idle vs loaded
# Usage: perf/index-ingest-load.sh [quick]     ("quick": 1 fork, short iterations)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JDK="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
OUT="$ROOT/perf/results/index-ingest-$(date -u +%F)"
if [ "${1:-}" = quick ]; then ITER=(-f 1 -wi 2 -w 1 -i 3 -r 2); else ITER=(-f 2 -wi 3 -w 2 -i 5 -r 2); fi
(cd "$ROOT" && ./mvnw -q -B -DskipTests package -pl perf -am) >&2
export KVGATE_JMH_NO_BUILD=1
"$ROOT/perf/jmh.sh" 'KvEventDecodeBenchmark' "${ITER[@]}" -prof gc -rf json -rff "$OUT-decode.json"
"$ROOT/perf/jmh.sh" 'BlockIndexLookupBenchmark' "${ITER[@]}" -prof gc -rf json -rff "$OUT-lookup.json"
"$ROOT/perf/jmh.sh" 'LookupUnderIngestBenchmark' "${ITER[@]}" -rf json -rff "$OUT-loaded.json"
CP="$ROOT/perf/target/kvgate-perf.jar:$ROOT/perf/target/lib/*"
"$JDK/bin/java" @"$ROOT/deploy/jvm.options" -cp "$CP" io.kvgate.perf.index.BlockIndexMemoryReport 10000000 1,2
"$JDK/bin/java" @"$ROOT/deploy/jvm.options" -cp "$CP" io.kvgate.perf.ingest.IngestLoadMain 10 2
