package io.kvgate.ingest.codec;

import java.nio.charset.StandardCharsets;

/** Storage tier codes for the {@code medium} field (vLLM: GPU, CPU, STORAGE; SGLang: GPU, CPU_PINNED, DISK, EXTERNAL). */
public final class Medium {
    /** Field absent or nil (older engines: GPU). */
    public static final int NONE = 0;
    public static final int GPU = 1;
    public static final int CPU = 2;
    public static final int STORAGE = 3;
    public static final int CPU_PINNED = 4;
    public static final int DISK = 5;
    public static final int EXTERNAL = 6;
    /** A string this decoder does not know. */
    public static final int OTHER = 7;

    static final byte[][] NAMES = {
        null,
        "GPU".getBytes(StandardCharsets.US_ASCII),
        "CPU".getBytes(StandardCharsets.US_ASCII),
        "STORAGE".getBytes(StandardCharsets.US_ASCII),
        "CPU_PINNED".getBytes(StandardCharsets.US_ASCII),
        "DISK".getBytes(StandardCharsets.US_ASCII),
        "EXTERNAL".getBytes(StandardCharsets.US_ASCII),
    };

    private Medium() {
    }

    public static String name(int code) {
        return switch (code) {
            case NONE -> "none";
            case GPU -> "GPU";
            case CPU -> "CPU";
            case STORAGE -> "STORAGE";
            case CPU_PINNED -> "CPU_PINNED";
            case DISK -> "DISK";
            case EXTERNAL -> "EXTERNAL";
            default -> "other";
        };
    }
}
