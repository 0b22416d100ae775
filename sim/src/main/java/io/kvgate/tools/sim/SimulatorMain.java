package io.kvgate.tools.sim;

import java.util.concurrent.CountDownLatch;

/** {@code ./kvgate sim ...}: runs one simulated engine until SIGINT/SIGTERM. */
public final class SimulatorMain {
    private SimulatorMain() {}

    public static int run(String[] args) {
        for (String a : args) {
            if (a.equals("--help") || a.equals("-h")) {
                System.out.print(SimulatorConfig.USAGE);
                return 0;
            }
        }
        SimulatorConfig config;
        EngineSimulator sim;
        try {
            config = SimulatorConfig.parse(args);
            sim = EngineSimulator.start(config);
        } catch (IllegalArgumentException | IllegalStateException e) {
            System.err.println("kvgate sim: " + e.getMessage());
            System.err.print(SimulatorConfig.USAGE);
            return 2;
        }
        CountDownLatch stop = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            sim.close();
            stop.countDown();
        }, "sim-shutdown"));
        System.out.println("kvgate sim: " + config.dialect().name().toLowerCase(java.util.Locale.ROOT) + " engine '"
            + config.model() + "' role " + config.role().name().toLowerCase(java.util.Locale.ROOT)
            + " listening on " + sim.baseUrl() + sim.describeExtras());
        try {
            stop.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return 0;
    }
}
