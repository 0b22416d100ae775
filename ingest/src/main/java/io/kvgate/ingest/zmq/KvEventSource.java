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
 * @param label        how metrics and the inventory name the source ({@code rule} label), "" when unnamed
 * @param allow        bind mode: peer addresses or CIDR blocks allowed to connect (ZAP); empty = any peer
 * @param curve        CURVE keys, or null for the NULL mechanism
 */
public record KvEventSource(int endpointId, String kvEventsUri, int dpRanks, String replayUri, boolean bind,
                            String topic, KeyMode keyMode, String label, java.util.List<String> allow, Curve curve) {

    /**
     * CURVE keys (Z85, 40 chars each). When we connect, {@code serverPublicKey} is the engine publisher's key and
     * {@code ourSecretKey} our client secret (our public key is derived); when we bind we are the CURVE server and
     * {@code ourSecretKey} is the server secret.
     */
    public record Curve(String serverPublicKey, String ourPublicKey, String ourSecretKey) {
        public Curve {
            for (String k : new String[] {serverPublicKey, ourPublicKey, ourSecretKey}) {
                if (k == null || k.length() != 40) {
                    throw new IllegalArgumentException("CURVE keys must be 40-character Z85 strings");
                }
            }
        }

        /**
         * Reads our key pair from a file: a ZeroMQ certificate ({@code public-key = "..."}, {@code secret-key =
         * "..."}, as {@code zcert} writes) or two bare Z85 keys, public then secret.
         */
        public static Curve fromSecretFile(String serverPublicKey, java.nio.file.Path file) throws java.io.IOException {
            String text = java.nio.file.Files.readString(file);
            java.util.regex.Matcher pub = java.util.regex.Pattern.compile("public-key\\s*=\\s*\"([^\"]{40})\"").matcher(text);
            java.util.regex.Matcher sec = java.util.regex.Pattern.compile("secret-key\\s*=\\s*\"([^\"]{40})\"").matcher(text);
            if (pub.find() && sec.find()) {
                return new Curve(serverPublicKey, pub.group(1), sec.group(1));
            }
            String[] words = text.trim().split("\\s+");
            if (words.length == 2 && words[0].length() == 40 && words[1].length() == 40) {
                return new Curve(serverPublicKey, words[0], words[1]);
            }
            throw new IllegalArgumentException("kv_events_curve_secret_file=" + file
                + " must hold a ZeroMQ certificate (public-key = \"...\", secret-key = \"...\") or two Z85 keys");
        }

        @Override
        public String toString() {
            return "Curve[serverPublicKey=" + serverPublicKey + ", ourPublicKey=" + ourPublicKey
                + ", ourSecretKey=<redacted>]";
        }
    }

    public KvEventSource(int endpointId, String kvEventsUri, int dpRanks, String replayUri, boolean bind, String topic,
                         KeyMode keyMode) {
        this(endpointId, kvEventsUri, dpRanks, replayUri, bind, topic, keyMode, "", java.util.List.of(), null);
    }

    public KvEventSource {
        if (label == null) {
            label = "";
        }
        allow = allow == null ? java.util.List.of() : java.util.List.copyOf(allow);
        for (String a : allow) {
            PeerAllowList.parse(a); // throws with the offending entry
        }
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
