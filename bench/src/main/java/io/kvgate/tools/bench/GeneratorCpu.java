package io.kvgate.tools.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * The generator's own CPU time, so every report says what the load cost the generator (I/O thread and whole JVM,
 * GC and JIT included): a busy I/O thread means the generator, not the server, may be the limit.
 *
 * <p>Threading: thread-safe; {@link #threadCpuNs()} measures the calling thread.
 */
final class GeneratorCpu {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private GeneratorCpu() {}

    /** CPU time of the calling thread in ns, or -1 when the JVM cannot tell. */
    static long threadCpuNs() {
        return THREADS.isCurrentThreadCpuTimeSupported() ? THREADS.getCurrentThreadCpuTime() : -1;
    }

    /** CPU time of the whole process in ns, or -1 when the JVM cannot tell. */
    static long processCpuNs() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            return os.getProcessCpuTime();
        }
        return -1;
    }
}
