package io.kvgate.dataplane;

import io.kvgate.control.log.Log;

/**
 * POSIX signal handlers for {@code serve}. Not Agrona's {@code ShutdownSignalBarrier}: since Agrona 2.0 it is a
 * shutdown hook, so a SIGTERM has already begun the JVM's exit when it fires. The process then leaves with 143, not
 * the 0 a supervisor expects after an orderly stop (#38); the hook waits at most 10 s for the application, less
 * than {@code shutdown.drain_delay_ms} plus the drain; and a second SIGTERM cannot skip the delay, because the JVM
 * ignores signals once it is exiting. A handler that runs instead of the JVM's default keeps all three.
 */
final class Signals {
    /** What {@link #handle} returns for a signal the process was started ignoring. */
    static final Object IGNORED = new Object();

    private Signals() {}

    /**
     * Installs {@code action} (run on the JVM's signal thread: it must return quickly) for {@code signal}; returns the
     * previous handler, {@link #IGNORED}, or null when the platform would not. The JDK's signal API is reached
     * reflectively: it is internal (jdk.unsupported) and javac would warn on every direct use.
     */
    static Object handle(String signal, Runnable action) {
        try {
            Class<?> signalClass = Class.forName("sun.misc.Signal");
            Class<?> handler = Class.forName("sun.misc.SignalHandler");
            Object h = java.lang.reflect.Proxy.newProxyInstance(Signals.class.getClassLoader(), new Class<?>[] {handler},
                (proxy, method, margs) -> {
                    if (method.getName().equals("handle")) {
                        action.run();
                    }
                    return null;
                });
            Object previous = signalClass.getMethod("handle", signalClass, handler)
                .invoke(null, signalClass.getConstructor(String.class).newInstance(signal), h);
            return previous == handler.getField("SIG_IGN").get(null) ? IGNORED : previous;
        } catch (ReflectiveOperationException | RuntimeException e) {
            Log.warn("SIG" + signal + " handling unavailable on this platform: " + e);
            return null;
        }
    }
}
