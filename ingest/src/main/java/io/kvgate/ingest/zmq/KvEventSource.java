package io.kvgate.ingest.zmq;

import java.nio.charset.StandardCharsets;

/**
 * Where and how to subscribe to one endpoint's KV events; validated at construction with messages naming the
 * field, the value and the rule.
 *
 * @param endpointId   gateway-assigned id, {@code 0..maxEndpoints-1} of the index
 * @param kvEventsUri  {@code tcp://host:port} of DP rank 0; rank r uses {@code port + r}. With {@code bind} the
 *                     gateway binds there (engines configured with a concrete host connect to the gateway)
 * @param dpRanks      1..8
 * @param replayUri    {@code tcp://host:port} of rank 0's replay ROUTER (rank r at {@code port + r}), or null
 * @param bind         bind instead of connect (see above)
 * @param topic        topic prefix ("" subscribes to everything; vLLM default "kv" is common)
 * @param keyMode      engine keys or learned keys
 */
public record KvEventSource(int endpointId, String kvEventsUri, int dpRanks, String replayUri, boolean bind,
                            String topic, KeyMode keyMode) {

    public KvEventSource {
        if (endpointId < 0) {
            throw new IllegalArgumentException("endpointId=" + endpointId + " must be >= 0");
        }
        if (dpRanks < 1 || dpRanks > 8) {
            throw new IllegalArgumentException("dp_ranks=" + dpRanks + " must be in 1..8");
        }
        checkUri("kv_events", kvEventsUri, dpRanks);
        if (replayUri != null) {
            checkUri("kv_replay", replayUri, dpRanks);
        }
        if (topic == null) {
            topic = "";
        }
        if (keyMode == null) {
            keyMode = KeyMode.ENGINE;
        }
    }

    public static KvEventSource connect(int endpointId, String kvEventsUri, int dpRanks, String replayUri) {
        return new KvEventSource(endpointId, kvEventsUri, dpRanks, replayUri, false, "", KeyMode.ENGINE);
    }

    private static void checkUri(String field, String uri, int dpRanks) {
        if (uri == null || uri.isBlank()) {
            throw new IllegalArgumentException(field + "=" + uri + " must be tcp://host:port");
        }
        if (uri.startsWith("tcp://")) {
            int port = portOf(uri);
            if (port < 1 || port + dpRanks - 1 > 65535) {
                throw new IllegalArgumentException(field + "=" + uri + " must end in :port with port + dp_ranks - 1 "
                    + "<= 65535 (dp_ranks=" + dpRanks + ")");
            }
        } else if (uri.startsWith("ipc://") || uri.startsWith("inproc://")) {
            if (dpRanks != 1) {
                throw new IllegalArgumentException(field + "=" + uri + " has no port to offset: dp_ranks="
                    + dpRanks + " needs tcp://host:port");
            }
        } else {
            throw new IllegalArgumentException(field + "=" + uri + " must start with tcp://, ipc:// or inproc://");
        }
    }

    static int portOf(String uri) {
        int colon = uri.lastIndexOf(':');
        if (colon < "tcp://".length()) {
            return -1;
        }
        try {
            return Integer.parseInt(uri.substring(colon + 1));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** The URI of DP rank {@code rank}: port + rank for tcp. */
    static String forRank(String uri, int rank) {
        if (!uri.startsWith("tcp://")) {
            return uri;
        }
        int colon = uri.lastIndexOf(':');
        return uri.substring(0, colon + 1) + (portOf(uri) + rank);
    }

    byte[] topicBytes() {
        return topic.getBytes(StandardCharsets.UTF_8);
    }
}
