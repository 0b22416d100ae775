package io.kvgate.ingest.codec;

import java.nio.charset.StandardCharsets;

/**
 * Storage tier codes for the {@code medium} field (vLLM: GPU, CPU, STORAGE; SGLang: GPU, CPU_PINNED, DISK, EXTERNAL,
 * and CPU_TIER1 / CPU_TIER2 on builds after sgl-project/sglang#18205, which named its host (L2) and storage (L3) tiers
 * that way first), and the {@code locality} of a stored block (vLLM #48281: LOCAL or REMOTE on its FS/OBJ/STORAGE tier
 * events; absent: unspecified).
 */
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
    /** SGLang's L2 host-memory tier (sglang#18205): a CPU tier. */
    public static final int CPU_TIER1 = 8;
    /** SGLang's L3 storage tier (sglang#18205): a disk tier. */
    public static final int CPU_TIER2 = 9;

    /** {@code locality} absent or nil: the block is the publishing engine's. */
    public static final int LOCALITY_UNSPECIFIED = 0;
    /** {@code locality: LOCAL}: storage local to the publishing engine. */
    public static final int LOCALITY_LOCAL = 1;
    /** {@code locality: REMOTE}: storage not local to it (shared by several engines, or elsewhere). */
    public static final int LOCALITY_REMOTE = 2;

    static final byte[] LOCAL = "LOCAL".getBytes(StandardCharsets.US_ASCII);
    static final byte[] REMOTE = "REMOTE".getBytes(StandardCharsets.US_ASCII);

    static final byte[][] NAMES = {
        null,
        "GPU".getBytes(StandardCharsets.US_ASCII),
        "CPU".getBytes(StandardCharsets.US_ASCII),
        "STORAGE".getBytes(StandardCharsets.US_ASCII),
        "CPU_PINNED".getBytes(StandardCharsets.US_ASCII),
        "DISK".getBytes(StandardCharsets.US_ASCII),
        "EXTERNAL".getBytes(StandardCharsets.US_ASCII),
        null, // OTHER
        "CPU_TIER1".getBytes(StandardCharsets.US_ASCII),
        "CPU_TIER2".getBytes(StandardCharsets.US_ASCII),
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
            case CPU_TIER1 -> "CPU_TIER1";
            case CPU_TIER2 -> "CPU_TIER2";
            default -> "other";
        };
    }
}
