#!/usr/bin/env bash
# Counts the gateway classes one streaming kv_exact chat request runs through before its first upstream byte and end
# to end (io.kvgate.perf.path.RequestPathClasses: JFR method tracing over the kvgate jars, an embedded gateway and an
# in-process fake engine; loopback only, a few seconds, nothing else started). Prints the counts per module, then
# each class in first-call order marked request / response.
#   perf/request-path.sh            builds perf (and what it needs) first
#   KVGATE_JMH_NO_BUILD=1 perf/request-path.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/perf/perf-java.sh"
exec "$JDK/bin/java" @"$ROOT/deploy/jvm.options" -Dkvgate.home="$ROOT" \
  -cp "$ROOT/perf/target/kvgate-perf.jar:$ROOT/perf/target/lib/*" io.kvgate.perf.path.RequestPathClasses "$@"
