package io.kvgate.dataplane.tenant;

import java.util.List;
import java.util.concurrent.CompletionStage;

/**
 * The two Redis commands the shared store needs, asynchronous: {@code EVALSHA} and {@code SCRIPT LOAD}. The Lettuce
 * implementation is {@link LettuceScripts}; tests give {@link RedisLimitStore} a fake that completes when they say.
 * Futures may complete on any thread (the store hands the answer back to the request's loop).
 */
interface RedisScripts extends AutoCloseable {
    /** {@code EVALSHA sha keys args}: the script's array reply (integers as {@link Long}). */
    CompletionStage<List<Object>> evalsha(String sha, String[] keys, String[] args);

    /** {@code SCRIPT LOAD script}: its SHA-1. */
    CompletionStage<String> scriptLoad(String script);

    /** Whether a connection is open now (commands fail at once while not). */
    boolean connected();

    @Override
    void close();
}
