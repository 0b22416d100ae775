#!/usr/bin/env bash
# Routing quality against an oracle (issue #35): each policy's engine-observed cache hit ratio as a fraction of an
# offline best-known placement of the same trace, with TTFT p50/p99 and the busiest engine's share, on two engine
# implementations (the bundled simulator and the independent indie engine) and 1 or 3 gateways behind HAProxy.
# The method, workloads and oracle are described in perf/routing_quality.py.
#
#   perf/routing-quality.sh                           # the matrix; perf/results/routing-quality-<date>.md
#   perf/routing-quality.sh --quick --engines indie --workloads shared-prefix --policies kv_exact --gateways 1
#   OUT=/tmp/x.md perf/routing-quality.sh ...         # write the report elsewhere
# Loopback only; every run bounded (--deadline seconds of load, bounded waits); stops only the processes it started.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/perf/results/routing-quality-$(date -u +%Y-%m-%d).md}"
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || { echo "needs haproxy (apt-get install haproxy)" >&2; exit 1; }
/usr/bin/python3 -c 'import cbor2, msgpack, zmq' 2>/dev/null \
  || { echo "needs Debian's python3-cbor2 python3-msgpack python3-zmq (apt-get install them)" >&2; exit 1; }
"$ROOT/kvgate" serve --help >/dev/null   # the launcher builds its jar first when the sources changed
exec /usr/bin/python3 "$ROOT/perf/routing_quality.py" --out "$OUT" "$@"
