package io.kvgate.dataplane;

import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

/** {@code ./kvgate serve --config FILE [--check]}: run the gateway until SIGINT/SIGTERM, then drain. */
public final class GatewayMain {
    private GatewayMain() {}

    public static int run(String[] args) throws Exception {
        String config = null;
        boolean check = false;
        long drainMs = 30_000;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--config", "-c" -> config = i + 1 < args.length ? args[++i] : null;
                case "--check" -> check = true;
                case "--drain-ms" -> drainMs = Long.parseLong(args[++i]);
                case "--help", "-h" -> {
                    System.out.println("usage: kvgate serve --config FILE [--check] [--drain-ms MS]\n"
                        + "  --config FILE   YAML configuration (see README: Configuration reference)\n"
                        + "  --check         validate the configuration and exit (0 = valid)\n"
                        + "  --drain-ms MS   on SIGTERM, how long requests in flight may take to finish (default 30000)");
                    return 0;
                }
                default -> {
                    System.err.println("kvgate serve: unknown option '" + args[i] + "' (see --help)");
                    return 2;
                }
            }
        }
        if (config == null) {
            System.err.println("kvgate serve: --config FILE is required");
            return 2;
        }
        GatewayConfig cfg;
        try {
            cfg = GatewayConfig.load(Path.of(config));
        } catch (ConfigException e) {
            System.err.println("kvgate: " + config + ": " + e.getMessage());
            return 2;
        }
        if (check) {
            System.out.println("configuration OK: " + cfg.rules().size() + " rule(s)");
            return 0;
        }
        Gateway gw = GatewayLauncher.start(cfg);
        System.err.println("kvgate: serving on " + cfg.listen().host() + ":" + gw.port() + " (" + gw.transportName()
            + "), admin on " + cfg.adminListen().host() + ":" + gw.adminPort());
        CountDownLatch stopped = new CountDownLatch(1);
        final long drain = drainMs;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.err.println("kvgate: draining (up to " + drain + " ms)");
            gw.close(drain);
            stopped.countDown();
        }, "kvgate-shutdown"));
        stopped.await();
        return 0;
    }
}
