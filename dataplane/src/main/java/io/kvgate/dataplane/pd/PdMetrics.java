package io.kvgate.dataplane.pd;

import io.kvgate.dataplane.metrics.LatencyHistogram;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/** Per-leg P/D metrics: latency, failures by leg and cause, kv_transfer_params found or missing. Thread-safe. */
public final class PdMetrics {
    final LatencyHistogram prefillLatency = new LatencyHistogram();
    final LatencyHistogram decodeFirstByte = new LatencyHistogram();
    final LongAdder paramsFound = new LongAdder();
    final LongAdder paramsMissing = new LongAdder();
    final LongAdder pairRetries = new LongAdder();
    final LongAdder requests = new LongAdder();
    /** Conditional P/D: requests sent through both legs, and requests served by the decode endpoint alone. */
    final LongAdder splitPath = new LongAdder();
    final LongAdder localPath = new LongAdder();
    private final ConcurrentHashMap<String, LongAdder> failures = new ConcurrentHashMap<>();

    void failure(String leg, String cause) {
        failures.computeIfAbsent(leg + "\u0000" + cause, k -> new LongAdder()).increment();
    }

    public long failures(String leg, String cause) {
        LongAdder a = failures.get(leg + "\u0000" + cause);
        return a == null ? 0 : a.sum();
    }

    public long paramsFound() {
        return paramsFound.sum();
    }

    public long paramsMissing() {
        return paramsMissing.sum();
    }

    public long decisions(String path) {
        return "local".equals(path) ? localPath.sum() : splitPath.sum();
    }

    public void write(StringBuilder out) {
        out.append("# HELP kvgate_pd_requests_total Requests driven through prefill/decode disaggregation.\n");
        out.append("# TYPE kvgate_pd_requests_total counter\nkvgate_pd_requests_total ").append(requests.sum()).append('\n');
        out.append("# HELP kvgate_pd_decisions_total P/D requests by path: split (prefill leg, then decode) or local (the"
            + " decode endpoint alone: it holds the prompt, or the uncached part is below pd.min_uncached_tokens).\n");
        out.append("# TYPE kvgate_pd_decisions_total counter\n");
        out.append("kvgate_pd_decisions_total{path=\"split\"} ").append(splitPath.sum()).append('\n');
        out.append("kvgate_pd_decisions_total{path=\"local\"} ").append(localPath.sum()).append('\n');
        out.append("# HELP kvgate_pd_prefill_seconds Prefill leg latency (request to complete answer).\n# TYPE kvgate_pd_prefill_seconds histogram\n");
        prefillLatency.write(out, "kvgate_pd_prefill_seconds", "");
        out.append("# HELP kvgate_pd_decode_first_byte_seconds Decode leg: request start to the decode engine's response head.\n");
        out.append("# TYPE kvgate_pd_decode_first_byte_seconds histogram\n");
        decodeFirstByte.write(out, "kvgate_pd_decode_first_byte_seconds", "");
        out.append("# HELP kvgate_pd_kv_transfer_params_total vLLM prefill answers with or without kv_transfer_params.\n");
        out.append("# TYPE kvgate_pd_kv_transfer_params_total counter\n");
        out.append("kvgate_pd_kv_transfer_params_total{result=\"found\"} ").append(paramsFound.sum()).append('\n');
        out.append("kvgate_pd_kv_transfer_params_total{result=\"missing\"} ").append(paramsMissing.sum()).append('\n');
        out.append("# HELP kvgate_pd_pair_retries_total Prefill legs retried (SGLang: the pair, with a fresh room).\n");
        out.append("# TYPE kvgate_pd_pair_retries_total counter\nkvgate_pd_pair_retries_total ").append(pairRetries.sum()).append('\n');
        out.append("# HELP kvgate_pd_leg_failures_total P/D leg failures by leg and cause.\n# TYPE kvgate_pd_leg_failures_total counter\n");
        failures.forEach((k, v) -> {
            int z = k.indexOf('\u0000');
            out.append("kvgate_pd_leg_failures_total{leg=\"").append(k, 0, z).append("\",cause=\"").append(k.substring(z + 1))
                .append("\"} ").append(v.sum()).append('\n');
        });
    }
}
