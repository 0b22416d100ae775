package io.kvgate.tools.sim;

/**
 * The simulated engine's timing: time to first token = base TTFT + prefill time per UNCACHED prompt token
 * (cached prefix tokens cost nothing, which is what makes KV-aware routing measurable), then a fixed inter-token
 * latency. Pure and thread-safe; the scheduler turns these numbers into event-loop timers.
 */
final class LatencyModel {
    private final long baseTtftNs;
    private final long itlNs;
    private final double prefillNsPerToken;

    LatencyModel(double ttftMs, double itlMs, double prefillUsPerToken) {
        this.baseTtftNs = Math.round(ttftMs * 1_000_000.0);
        this.itlNs = Math.round(itlMs * 1_000_000.0);
        this.prefillNsPerToken = prefillUsPerToken * 1_000.0;
    }

    long firstTokenDelayNs(long uncachedPromptTokens) {
        return baseTtftNs + Math.round(prefillNsPerToken * Math.max(0, uncachedPromptTokens));
    }

    long interTokenDelayNs() {
        return itlNs;
    }
}
