package io.kvgate.dataplane.request;

import java.util.concurrent.ThreadLocalRandom;

/** {@code X-Request-Id}: kept when the client sends a sane one, generated otherwise. */
public final class RequestIds {
    private static final byte[] HEX = "0123456789abcdef".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    private RequestIds() {}

    public static String keepOrGenerate(String fromClient) {
        if (fromClient != null && !fromClient.isEmpty() && fromClient.length() <= 256 && printable(fromClient)) {
            return fromClient;
        }
        return generate();
    }

    /** 128 random bits as 32 hex chars, the shape vLLM uses for its own ids. */
    public static String generate() {
        ThreadLocalRandom r = ThreadLocalRandom.current();
        long a = r.nextLong();
        long b = r.nextLong();
        byte[] c = new byte[32]; // Latin-1 bytes: the String takes them without the char[] → byte[] compression pass
        for (int i = 0; i < 16; i++) {
            c[i] = HEX[(int) (a >>> (60 - 4 * i)) & 0xF];
            c[16 + i] = HEX[(int) (b >>> (60 - 4 * i)) & 0xF];
        }
        return new String(c, java.nio.charset.StandardCharsets.ISO_8859_1);
    }

    private static boolean printable(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < 0x21 || c > 0x7e) {
                return false;
            }
        }
        return true;
    }
}
