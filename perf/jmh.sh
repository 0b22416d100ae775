#!/usr/bin/env bash
# Runs JMH benchmarks with the project's one set of JVM flags (deploy/jvm.options); forks inherit them.
#   perf/jmh.sh [JMH args...]       e.g. perf/jmh.sh 'BlockHash.*' -prof gc -rf json -rff perf/results/x.json
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/perf/perf-java.sh"
exec "$JDK/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
  -cp "$ROOT/perf/target/kvgate-perf.jar:$ROOT/perf/target/lib/*" org.openjdk.jmh.Main "$@"
