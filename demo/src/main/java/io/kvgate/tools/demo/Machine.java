package io.kvgate.tools.demo;

import java.nio.file.Files;
import java.nio.file.Path;

/** One line describing the machine a result was measured on (CPU model, cores, memory, kernel, JDK). */
public final class Machine {
    private Machine() {}

    public static String describe() {
        String cpu = "unknown CPU";
        try {
            for (String line : Files.readAllLines(Path.of("/proc/cpuinfo"))) {
                if (line.startsWith("model name")) {
                    cpu = line.substring(line.indexOf(':') + 1).trim();
                    break;
                }
            }
        } catch (Exception ignored) {
            // not Linux: keep "unknown CPU"
        }
        long memGiB = ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean())
            .getTotalMemorySize() >> 30;
        return cpu + ", " + Runtime.getRuntime().availableProcessors() + " cores, " + memGiB + " GiB, Linux "
            + System.getProperty("os.version") + ", JDK " + System.getProperty("java.version");
    }
}
