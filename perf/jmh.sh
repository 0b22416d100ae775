#!/usr/bin/env bash
# Runs JMH benchmarks with the project's one set of JVM flags (deploy/jvm.options); forks inherit them.
#   perf/jmh.sh [JMH args...]       e.g. perf/jmh.sh 'BlockHash.*' -prof gc -rf json -rff perf/results/x.json
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JDK="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
if [ ! -x "$JDK/bin/java" ] || ! "$JDK/bin/java" -version 2>&1 | grep -qE 'version "(2[5-9]|[3-9][0-9])'; then
  JDK=/usr/lib/jvm/temurin-25-jdk-amd64
fi
export JAVA_HOME="$JDK"
if [ -z "${KVGATE_JMH_NO_BUILD:-}" ]; then
  (cd "$ROOT" && ./mvnw -q -B -DskipTests package -pl perf -am) >&2
fi
exec "$JDK/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
  -cp "$ROOT/perf/target/kvgate-perf.jar:$ROOT/perf/target/lib/*" org.openjdk.jmh.Main "$@"
