package io.kvgate.dataplane.pd;

import io.kvgate.dataplane.metrics.HistogramFamily;
import io.kvgate.dataplane.metrics.LatencyHistogram;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.List;
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
    /** TensorRT-LLM: requests whose context answer ended them (first token EOS, or max_tokens 1): no decode leg. */
    final LongAdder finishedAtPrefill = new LongAdder();
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
        return switch (path) {
            case "local" -> localPath.sum();
            case "finished_at_prefill" -> finishedAtPrefill.sum();
            default -> splitPath.sum();
        };
    }

    /** Registers the P/D families in the gateway's registry. */
    public void register(PrometheusRegistry registry) {
        CounterWithCallback.builder().name("kvgate_pd_requests_total").help("Requests driven through prefill/decode disaggregation.")
            .callback(cb -> cb.call(requests.sum())).register(registry);
        CounterWithCallback.builder().name("kvgate_pd_decisions_total").help("P/D requests by path: split (prefill leg, then"
                + " decode) or local (the decode endpoint alone: it holds the prompt, or the uncached part is below"
                + " pd.min_uncached_tokens); finished_at_prefill counts split requests the prefill's answer"
                + " ended (TensorRT-LLM: first token EOS), which got no decode leg.")
            .labelNames("path").callback(cb -> {
                cb.call(splitPath.sum(), "split");
                cb.call(localPath.sum(), "local");
                cb.call(finishedAtPrefill.sum(), "finished_at_prefill");
            }).register(registry);
        HistogramFamily.register(registry, "kvgate_pd_prefill_seconds", "Prefill leg latency (request to complete answer).",
            List.of(), sink -> sink.add(prefillLatency));
        HistogramFamily.register(registry, "kvgate_pd_decode_first_byte_seconds",
            "Decode leg: request start to the decode engine's response head.", List.of(), sink -> sink.add(decodeFirstByte));
        CounterWithCallback.builder().name("kvgate_pd_kv_transfer_params_total")
            .help("vLLM prefill answers with or without kv_transfer_params.").labelNames("result").callback(cb -> {
                cb.call(paramsFound.sum(), "found");
                cb.call(paramsMissing.sum(), "missing");
            }).register(registry);
        CounterWithCallback.builder().name("kvgate_pd_pair_retries_total")
            .help("Prefill legs retried (SGLang: the pair, with a fresh room).").callback(cb -> cb.call(pairRetries.sum()))
            .register(registry);
        CounterWithCallback.builder().name("kvgate_pd_leg_failures_total").help("P/D leg failures by leg and cause.")
            .labelNames("leg", "cause").callback(cb -> failures.forEach((k, v) -> {
                int z = k.indexOf('\u0000');
                cb.call(v.sum(), k.substring(0, z), k.substring(z + 1));
            })).register(registry);
    }
}
