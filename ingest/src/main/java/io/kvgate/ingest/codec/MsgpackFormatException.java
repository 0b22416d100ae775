package io.kvgate.ingest.codec;

/**
 * Thrown by {@link MsgpackReader} on malformed or truncated input and caught inside {@link KvEventDecoder}: it
 * never leaves the decoder. A single preallocated instance without a stack trace: malformed input from a
 * misbehaving publisher must cost a counter increment, not an allocation storm. The reason lives on the reader
 * ({@link MsgpackReader#errorReason()}), not on the exception.
 */
final class MsgpackFormatException extends RuntimeException {
    static final MsgpackFormatException INSTANCE = new MsgpackFormatException();

    private MsgpackFormatException() {
        super("malformed msgpack", null, false, false);
    }
}
