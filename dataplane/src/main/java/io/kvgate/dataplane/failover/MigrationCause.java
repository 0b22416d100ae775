package io.kvgate.dataplane.failover;

/** Why a stream left its endpoint: the {@code cause} label of {@code kvgate_stream_migrations_total}. */
public enum MigrationCause {
    /** The engine closed or refused the connection before answering (a non-streamed request is retried whole). */
    CONNECT_FAILED("connect_failed"),
    /** The engine's connection failed in the middle of the answer (reset, closed, ended without [DONE]). */
    RESET("reset"),
    /** The engine sent no byte for {@code failover.stall_ms}. */
    STALL("stall"),
    /** The engine sent an in-stream error event. */
    ENGINE_ERROR("engine_error"),
    /** {@code ctl drain --migrate} moved the stream off its endpoint. */
    DRAIN("drain");

    public final String label;

    MigrationCause(String label) {
        this.label = label;
    }
}
