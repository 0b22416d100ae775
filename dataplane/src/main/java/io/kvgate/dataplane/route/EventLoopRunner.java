package io.kvgate.dataplane.route;

import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.Future;
import io.netty.util.concurrent.ScheduledFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.agrona.concurrent.AgentInvoker;

/**
 * The routing agent's runner in io mode ({@code router.thread: io}, the default with one I/O thread): the gateway's
 * event loop invokes the {@link RouterAgent} through an Agrona {@link AgentInvoker}, so the loop is the agent's only
 * runner and no thread is handed anything.
 *
 * <p>When the loop runs a cycle ({@link #runCycle}, always with housekeeping, as the dedicated thread's batch start):
 * <ul>
 *   <li>at the end of a turn that published requests (the port asks, {@link RoutingStage#endOfTurn});</li>
 *   <li>on a scheduled duty task, so housekeeping happens without requests: every
 *       {@value RouterAgent#DUTY_PERIOD_MS} ms while a request waits for admission (its queue is served and shed on
 *       time), every {@value RouterAgent#IDLE_DUTY_PERIOD_MS} ms otherwise;</li>
 *   <li>when another thread (admin explain, a swap, tests) asks ({@link #requestCycle}: at most one task pending).</li>
 * </ul>
 * Each request published on the loop is also decided as it is published ({@link RouterAgent#decideAtPublish}), which
 * the stage calls directly: that is not a full cycle.
 */
final class EventLoopRunner implements AutoCloseable {
    private final EventExecutor loop;
    private final RouterAgent agent;
    private final AgentInvoker invoker;
    /** A cycle was asked of the loop by another thread and has not started yet. */
    private final AtomicBoolean cyclePending = new AtomicBoolean();
    private final Runnable requestedCycleTask = this::runRequestedCycle;
    private final Runnable dutyTask = this::runScheduledCycle;
    /** The loop's next scheduled duty cycle (written on the loop, cancelled by {@link #close}). */
    private volatile ScheduledFuture<?> dutyFuture;
    /** Loop only: the scheduled duty cycle is the idle period away. */
    private boolean dutyIdle;
    private volatile boolean closed;

    EventLoopRunner(EventExecutor loop, RouterAgent agent) {
        this.loop = loop;
        this.agent = agent;
        this.invoker = new AgentInvoker(agent::countHandlerError, null, agent);
        invoker.start();
        scheduleDutyCycle();
    }

    EventExecutor loop() {
        return loop;
    }

    /** Whether the caller is the loop that runs the agent. */
    boolean onRunner() {
        return loop.inEventLoop();
    }

    /**
     * Loop only: one full cycle now, or, when called from a delivery inside a cycle, one right after it (never inside
     * it).
     */
    void runCycle() {
        if (agent.inCycle()) {
            requestCycle();
            return;
        }
        agent.housekeepNextCycle();
        invoker.invoke();
        if (dutyIdle && agent.anyWaiting()) {
            scheduleDutyCycle(); // a request began to wait: its queue is served within one duty period from now
        }
    }

    /** Any thread: one cycle on the loop soon (at most one task pending, however many threads ask). */
    void requestCycle() {
        // getAndSet on both sides (here and in runRequestedCycle): the loop's read of the flag orders every publish
        // made before a caller found a cycle already pending before that cycle's poll of the ring.
        if (!cyclePending.getAndSet(true)) {
            try {
                loop.execute(requestedCycleTask);
            } catch (RejectedExecutionException e) {
                // The loop is shutting down: the requests of its connections are gone; an admin caller times out.
                cyclePending.set(false);
            }
        }
    }

    private void runRequestedCycle() {
        cyclePending.getAndSet(false);
        runCycle();
    }

    private void runScheduledCycle() {
        runCycle();
        scheduleDutyCycle();
    }

    /** Loop (or the constructor): replaces the scheduled duty cycle by one at the period that applies now. */
    private void scheduleDutyCycle() {
        boolean idle = !agent.anyWaiting();
        ScheduledFuture<?> previous = dutyFuture;
        if (previous != null) {
            previous.cancel(false); // none, or the one running now, or an idle one a waiting request overtakes
        }
        long delayNs = idle ? RouterAgent.IDLE_DUTY_PERIOD_NS : RouterAgent.DUTY_PERIOD_NS;
        ScheduledFuture<?> next = loop.schedule(dutyTask, delayNs, TimeUnit.NANOSECONDS);
        dutyFuture = next;
        dutyIdle = idle;
        if (closed) {
            next.cancel(false); // close() ran on another thread meanwhile and may have cancelled the previous one
        }
    }

    /**
     * Stops the duty task and closes the agent on its loop ({@link RouterAgent#onClose} answers what is still pending),
     * waiting at most 2 s for the loop; a loop already shut down has no connections left to answer.
     */
    @Override
    public void close() {
        closed = true;
        dutyFuture.cancel(false);
        if (loop.inEventLoop()) {
            invoker.close();
            return;
        }
        try {
            Future<?> f = loop.submit(invoker::close);
            f.awaitUninterruptibly(2, TimeUnit.SECONDS);
        } catch (RejectedExecutionException gone) {
            // The loop ended first: nothing it served is waiting for an answer any more.
        }
    }
}
