package io.kvgate.dataplane.tenant;

import io.kvgate.control.log.Log;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;

/**
 * {@link RedisScripts} over one Lettuce connection (commands are pipelined on it by every loop), on Lettuce's own
 * single I/O thread. Commands are rejected at once while disconnected (not queued until a reconnect, which would make
 * requests wait on a dead server); Lettuce reconnects a lost connection by itself, and a first connection that failed
 * (the server not up yet) is tried again every second here. Lettuce's own command timeout is a backstop only: the
 * store's timer on the request's loop decides first.
 */
final class LettuceScripts implements RedisScripts {
    static final long RETRY_CONNECT_MS = 1_000;
    private final ClientResources resources;
    private final RedisClient client;
    private final RedisURI uri;
    private volatile CompletableFuture<StatefulRedisConnection<String, String>> connection;
    private volatile boolean closed;

    LettuceScripts(String url, long timeoutMs) {
        // One I/O thread: a single connection; reconnects from 50 ms backing off to at most 1 s, so a returning server
        // is used again within about a second (Lettuce's default backs off to 30 s).
        this.resources = DefaultClientResources.builder().ioThreadPoolSize(1).computationThreadPoolSize(1)
            .reconnectDelay(io.lettuce.core.resource.Delay.exponential(Duration.ofMillis(50), Duration.ofSeconds(1), 2,
                TimeUnit.MILLISECONDS))
            .build();
        this.uri = RedisURI.create(url);
        this.uri.setTimeout(Duration.ofMillis(Math.max(1_000, timeoutMs * 4)));
        this.client = RedisClient.create(resources, uri);
        client.setOptions(ClientOptions.builder()
            .autoReconnect(true)
            .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
            .socketOptions(SocketOptions.builder().connectTimeout(Duration.ofMillis(Math.max(200, timeoutMs * 4))).build())
            .timeoutOptions(TimeoutOptions.enabled(Duration.ofMillis(Math.max(1_000, timeoutMs * 4))))
            .build());
        connect();
    }

    private void connect() {
        if (closed) {
            return;
        }
        CompletableFuture<StatefulRedisConnection<String, String>> f = client.connectAsync(StringCodec.UTF8, uri).toCompletableFuture();
        connection = f;
        f.whenComplete((c, err) -> {
            if (err != null && !closed) {
                Log.warn("rate_limit_store " + uri.getHost() + ":" + uri.getPort() + ": cannot connect (" + err.getMessage()
                    + "), trying again every " + RETRY_CONNECT_MS + " ms; on_failure decides meanwhile");
                resources.eventExecutorGroup().schedule(this::connect, RETRY_CONNECT_MS, TimeUnit.MILLISECONDS);
            } else if (c != null && closed) {
                c.closeAsync();
            } else if (c != null) {
                Log.info("rate_limit_store " + uri.getHost() + ":" + uri.getPort() + ": connected");
            }
        });
    }

    @Override
    public boolean connected() {
        CompletableFuture<StatefulRedisConnection<String, String>> f = connection;
        if (!f.isDone()) {
            return true; // connecting: the request waits for it, bounded by the store's timer
        }
        return !f.isCompletedExceptionally() && f.getNow(null).isOpen();
    }

    @Override
    public CompletionStage<List<Object>> evalsha(String sha, String[] keys, String[] args) {
        return connection.thenCompose(c -> c.async().<List<Object>>evalsha(sha, ScriptOutputType.MULTI, keys, args));
    }

    @Override
    public CompletionStage<String> scriptLoad(String script) {
        return connection.thenCompose(c -> c.async().scriptLoad(script));
    }

    @Override
    public void close() {
        closed = true;
        CompletableFuture<StatefulRedisConnection<String, String>> f = connection;
        f.thenAccept(StatefulRedisConnection::closeAsync);
        client.shutdownAsync(0, 2, TimeUnit.SECONDS).whenComplete((v, e) -> resources.shutdown(0, 2, TimeUnit.SECONDS));
    }
}
