package io.kvgate.testkit;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * The ZeroMQ slow-joiner handshake every PUB/SUB test uses before it publishes anything it asserts on.
 *
 * <p>A PUB socket drops every message published before the subscriber's SUBSCRIBE frame has reached it, and that
 * frame travels <em>after</em> the TCP connect: a socket monitor's "connected" (the gateway's
 * {@code subscribers[].connected}) does not mean "subscribed". So: publish throwaway messages until one lands at the
 * subscriber, then wait until the last one published has landed too. After that, nothing the test publishes can be
 * lost (PUB/SUB keeps order on one connection and drops only above the high-water mark), and no handshake message is
 * still queued in front of the message the test reads next.
 *
 * <p>The throwaway messages published before the subscription arrived are lost to the subscriber for good: when
 * they change the publisher's state (an engine caching a block), a test that compares totals resets that state
 * after the handshake (an engine's {@code AllBlocksCleared}) or publishes throwaway messages that change nothing.
 *
 * <p>Both sides are given as callbacks, so the same handshake serves a test-owned PUB against the real ingest
 * (pumped from the test thread), an engine simulator against a test-owned SUB, and a simulator against a running
 * gateway (polled through its admin API).
 */
public final class ZmqHandshake {
    /** How long to look for a landing before publishing the next throwaway message. */
    private static final long REPUBLISH_AFTER_NS = TimeUnit.MILLISECONDS.toNanos(50);

    /** Publishes one throwaway message (a batch with its own sequence number) and returns that sequence number. */
    @FunctionalInterface
    public interface Publisher {
        long publishOne() throws Exception;
    }

    /**
     * Looks at the subscriber once (receiving, pumping or polling as the subscriber needs; it may block briefly) and
     * returns the highest sequence number it has taken so far, or -1 when nothing has landed yet.
     */
    @FunctionalInterface
    public interface Subscriber {
        long highestSeq() throws Exception;
    }

    private ZmqHandshake() {}

    /**
     * Runs the handshake; returns the sequence number of the last throwaway message (every message up to it has
     * landed). Fails with an {@link AssertionError} naming {@code what}, what was published, and {@code state}
     * (evaluated only on failure, so it shows the state at the deadline) when it does not complete in time.
     */
    public static long await(String what, Duration timeout, Publisher publisher, Subscriber subscriber,
                             Supplier<String> state) {
        long deadline = System.nanoTime() + timeout.toNanos();
        long lastPublished = -1;
        long highest = -1;
        int published = 0;
        try {
            // 1. Publish until one message lands: the subscription has reached the publisher.
            while (highest < 0) {
                if (System.nanoTime() - deadline > 0) {
                    throw new AssertionError(what + ": no message reached the subscriber after " + published
                        + " published in " + timeout.toMillis() + " ms (last seq " + lastPublished + "); "
                        + state.get());
                }
                lastPublished = publisher.publishOne();
                published++;
                long republishAt = System.nanoTime() + REPUBLISH_AFTER_NS;
                while (highest < 0 && System.nanoTime() - republishAt < 0) {
                    highest = subscriber.highestSeq();
                    if (highest < 0) {
                        pause();
                    }
                }
            }
            // 2. Drain: everything published after the first landing arrives (nothing is dropped any more).
            while (highest < lastPublished) {
                if (System.nanoTime() - deadline > 0) {
                    throw new AssertionError(what + ": subscribed (seq " + highest + " landed) but the last published seq "
                        + lastPublished + " never arrived within " + timeout.toMillis() + " ms; " + state.get());
                }
                long seen = subscriber.highestSeq();
                if (seen > highest) {
                    highest = seen;
                } else {
                    pause();
                }
            }
            return lastPublished;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(what + ": interrupted", e);
        } catch (AssertionError | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new AssertionError(what + ": " + e, e);
        }
    }

    private static void pause() throws InterruptedException {
        Thread.sleep(1);
    }
}
