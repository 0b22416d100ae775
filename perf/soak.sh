#!/usr/bin/env bash
# Issue #43 item 5: the gateway soak (tools/.../system/soak/GatewaySoakTest, tag "soak") for MINUTES (30 by default):
# the gateway as its own JVM over simulated engine processes, one engine SIGKILLed and restarted every 60 s, a reload
# (SIGHUP / ctl reload) every 30 s, hostile peers every 45 s, a slow-reader stream throughout. Asserts no failed
# request beyond those in flight on a killed engine, gateway RSS within +-10 % after warm-up, no stuck KV subscription.
# The report and every process's log land in tools/target/soak/<start time>/.
# usage: perf/soak.sh [MINUTES] [-Dkvgate.soak.<switch>=... ...]
#   switches: engines (4), clients (4), killEverySeconds (60), reloadEverySeconds (30), hostileEverySeconds (45),
#             warmupSeconds (min(120, MINUTES*15)), hostile.zmtp, hostile.pipeline, hostile.slowloris, slowReader (true)
# Runs under nice: the machine may be shared. Only processes the test started are stopped (by PID).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MINUTES=${1:-30}
[ $# -gt 0 ] && shift
exec nice -n 10 "$ROOT/kvgate" test --soak -pl tools -am -Dtest=GatewaySoakTest -Dsurefire.failIfNoSpecifiedTests=false \
  -Dkvgate.soak.minutes="$MINUTES" "$@"
