package io.kvgate.dataplane.wire;

import io.netty.handler.codec.DecoderException;

/** An engine's response broke the HTTP/1.1 grammar {@link EngineResponseDecoder} accepts: the connection is unusable. */
public final class EngineHttpException extends DecoderException {
    private static final long serialVersionUID = 1L;

    public EngineHttpException(String message) {
        super("malformed engine response: " + message);
    }
}
