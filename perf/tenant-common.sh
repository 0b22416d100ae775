# Shared by the tenant scripts (tenant-shares.sh, tenant-reserve-latency.sh, tenant-store-failure.sh); sourced after
# fleet-common.sh, not run. A redis-server of the script's own (loopback, no persistence) and the gateway settings
# every tenant run uses.
command -v redis-server >/dev/null || { echo "needs redis-server (apt-get install redis-server)" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "needs redis-cli (apt-get install redis-tools)" >&2; exit 1; }

# The gateways' probes and breaker, loosened: the engines are local simulators that do not fail in these runs, and on a
# saturated host a 1 s probe timeout marks a live simulator down (kvgate_upstream_errors_total{cause="endpoint_down"}:
# its streams are cut, and with every endpoint down every request is a 503), which measures the host, not the limits.
TENANT_HEALTH="health: {interval_ms: 60000, timeout_ms: 10000, unhealthy_threshold: 100, breaker_failure_threshold: 10000}"

start_redis() { # start_redis NAME PORT : a redis-server as the process NAME (exec: its recorded PID is the server's)
  start "$1" exec redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no --protected-mode no
  for _ in $(seq 1 100); do
    if [ "$(redis-cli -p "$2" ping 2>/dev/null)" = PONG ]; then return 0; fi
    sleep 0.1
  done
  echo "redis-server $1 (port $2) did not answer PING within 10 s; log:" >&2; tail -20 "$WORK/$1.log" >&2; exit 1
}

# A tenant's key and the digest the configuration holds.
tenant_digest() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

# A gateway's /metrics into FILE, for the summaries.
scrape() { # scrape PORT FILE KEY : the client listener's /metrics, which asks for a key where keys are configured
  curl -s -m 30 -H "Authorization: Bearer $3" "http://127.0.0.1:$1/metrics" >"$2" || { echo "port $1: /metrics did not answer within 30 s" >&2; exit 1; }
}

sim_rule() { # sim_rule PORT : the rules section of a gateway in front of the one simulator `m` on PORT
  cat <<YAML
rules:
  - name: chat
    models: [m]
    engine: vllm
    policy: round_robin
    endpoints:
      - url: http://127.0.0.1:$1
YAML
}
