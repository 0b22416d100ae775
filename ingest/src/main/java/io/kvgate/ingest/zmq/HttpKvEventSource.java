package io.kvgate.ingest.zmq;

import java.net.URI;
import java.net.URISyntaxException;

/**
 * One endpoint whose KV events are drained over HTTP (TensorRT-LLM's {@code POST /kv_cache_events}: each read
 * returns the events since the previous read and removes them). Its blocks are keyed by the engine's own hashes
 * ({@link KeyMode#ENGINE}: the rule hashes requests with TensorRT-LLM's v1 block key) or in learned-key mode.
 *
 * @param endpointId gateway-assigned id, {@code 0..maxEndpoints-1} of the index
 * @param url        {@code http://host:port/path} ({@code kv_events})
 * @param pollNs     time between the end of one poll and the start of the next ({@code kv_poll_ms})
 * @param dpRanks    attention-DP ranks whose events come through this endpoint (each event names its rank), 1..8
 * @param label      how metrics and the inventory name the source ({@code rule} label), "" when unnamed
 * @param mode       whose keys index the blocks: the engine's hashes, or the gateway's learned keys of their tokens
 */
public record HttpKvEventSource(int endpointId, String url, long pollNs, int dpRanks, String label, KeyMode mode) {
    /** A source in learned-key mode (the rule's {@code kv_key_mode} default for TensorRT-LLM). */
    public HttpKvEventSource(int endpointId, String url, long pollNs, int dpRanks, String label) {
        this(endpointId, url, pollNs, dpRanks, label, KeyMode.LEARNED);
    }

    public HttpKvEventSource {
        if (mode == null) {
            mode = KeyMode.LEARNED;
        }
        if (label == null) {
            label = "";
        }
        if (endpointId < 0) {
            throw new IllegalArgumentException("endpointId=" + endpointId + " must be >= 0");
        }
        if (dpRanks < 1 || dpRanks > 8) {
            throw new IllegalArgumentException("dp_ranks=" + dpRanks + " must be in 1..8");
        }
        if (pollNs < 1_000_000L) {
            throw new IllegalArgumentException("kv_poll_ms=" + pollNs / 1_000_000 + " must be >= 1");
        }
        URI u = parse(url);
        if (!"http".equals(u.getScheme()) || u.getHost() == null || u.getPort() < 1) {
            throw new IllegalArgumentException("kv_events=" + url + " must be http://host:port/path");
        }
    }

    private static URI parse(String url) {
        if (url == null) {
            throw new IllegalArgumentException("kv_events=null must be http://host:port/path");
        }
        try {
            return new URI(url);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("kv_events=" + url + " is not a valid URL (" + e.getMessage() + ")");
        }
    }

    /** The host, IPv6 brackets removed. */
    public String host() {
        String h = parse(url).getHost();
        return h.startsWith("[") && h.endsWith("]") ? h.substring(1, h.length() - 1) : h;
    }

    public int port() {
        return parse(url).getPort();
    }

    /** The request target: path and query, "/" when empty. */
    public String target() {
        URI u = parse(url);
        String path = u.getRawPath() == null || u.getRawPath().isEmpty() ? "/" : u.getRawPath();
        return u.getRawQuery() == null ? path : path + "?" + u.getRawQuery();
    }
}
