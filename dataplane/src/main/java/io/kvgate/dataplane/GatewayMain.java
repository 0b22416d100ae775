package io.kvgate.dataplane;

import io.kvgate.control.ControlSocketLocation;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.config.ConfigCheck;
import io.kvgate.dataplane.config.MemoryBudget;
import io.kvgate.dataplane.config.ReloadOutcome;
import io.kvgate.dataplane.config.RestartRequiredException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

/**
 * {@code ./kvgate serve --config FILE [--check]}: run the gateway until SIGINT/SIGTERM, then drain. SIGHUP reloads
 * FILE. {@code --check} runs exactly the checks start-up and reload run ({@link ConfigCheck}) and prints the
 * configuration's memory budget ({@link MemoryBudget}).
 */
public final class GatewayMain {
    private GatewayMain() {}

    public static int run(String[] args) throws Exception {
        return run(args, System.out);
    }

    /** As {@link #run(String[])}, writing what {@code --check} prints to {@code out}. */
    static int run(String[] args, PrintStream out) throws Exception {
        String config = null;
        boolean check = false;
        long drainMs = 30_000;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--config", "-c" -> config = i + 1 < args.length ? args[++i] : null;
                case "--check" -> check = true;
                case "--drain-ms" -> {
                    try {
                        drainMs = Long.parseLong(i + 1 < args.length ? args[++i] : "");
                    } catch (NumberFormatException e) {
                        System.err.println("kvgate serve: --drain-ms needs a number of milliseconds");
                        return 2;
                    }
                }
                case "--help", "-h" -> {
                    System.out.println("usage: kvgate serve --config FILE [--check] [--drain-ms MS]\n"
                        + "  --config FILE   YAML configuration (see docs/configuration.md); SIGHUP reloads it\n"
                        + "  --check         run every start-up check on the configuration, print its memory budget and the\n"
                        + "                  suggested -Xmx / -XX:MaxDirectMemorySize, and exit (0 = valid)\n"
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
        Path file = Path.of(config).toAbsolutePath();
        GatewayConfig cfg;
        try {
            cfg = ConfigCheck.load(file);
        } catch (ConfigException e) {
            System.err.println("kvgate: " + config + ": " + e.getMessage());
            return 2;
        }
        if (check) {
            out.println("configuration OK: " + cfg.rules().size() + " rule(s)");
            int ioThreads = cfg.ioThreads() > 0 ? cfg.ioThreads() : Math.max(1, Runtime.getRuntime().availableProcessors());
            MemoryBudget.of(cfg, ioThreads).report(hostMemoryBytes()).forEach(out::println);
            return 0;
        }
        Path socket = controlSocketPath(cfg, file);
        Gateway gw = Gateway.start(new Gateway.Options(cfg, NanoClock.SYSTEM, file, socket));
        installReloadOnSighup(gw); // before the line that says it serves: a SIGHUP after it reloads, never kills
        Log.info("serving on " + cfg.listen().host() + ":" + gw.port() + " (" + gw.transportName()
            + "), admin on " + cfg.adminListen().host() + ":" + gw.adminPort()
            + (socket == null ? ", no control socket" : ", control socket " + socket));
        CountDownLatch stopped = new CountDownLatch(1);
        final long drain = drainMs;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            Log.info("draining (up to " + drain + " ms)");
            gw.close(drain);
            stopped.countDown();
        }, "kvgate-shutdown"));
        stopped.await();
        return 0;
    }

    /** This host's physical memory, 0 when the JVM cannot tell. */
    private static long hostMemoryBytes() {
        return ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os
            ? os.getTotalMemorySize() : 0;
    }

    /**
     * Where {@code serve} binds its control socket: {@code control_socket} when set ({@code off} = none; relative to
     * the configuration file), else the first usable directory of {@link ControlSocketLocation} — the list
     * {@code ctl} searches, so a non-root gateway and its ctl meet without flags.
     */
    static Path controlSocketPath(GatewayConfig cfg, Path configFile) {
        String s = cfg.controlSocket();
        if ("off".equals(s)) {
            return null;
        }
        if (s != null) {
            Path p = Path.of(s);
            return p.isAbsolute() ? p : configFile.getParent().resolve(p);
        }
        return ControlSocketLocation.forServer(System.getenv(), ControlSocketLocation.currentUid(),
            ControlSocketLocation::writableOrCreatable);
    }

    /**
     * SIGHUP → reload the --config file, on a fresh thread (never on the signal thread). The JDK's signal API is
     * reached reflectively: it is internal (jdk.unsupported) and javac would warn on every direct use.
     */
    private static void installReloadOnSighup(Gateway gw) {
        Runnable reload = () -> {
            try {
                ReloadOutcome o = gw.reloadConfigFile();
                if (!o.applied()) {
                    Log.info("SIGHUP: " + gw.configFile() + " unchanged (version " + o.version() + ")");
                }
            } catch (ConfigException e) {
                Log.error("SIGHUP: " + gw.configFile() + " not applied, nothing changed: " + e.getMessage());
            } catch (RestartRequiredException e) {
                Log.error("SIGHUP: " + e.getMessage());
            } catch (RuntimeException e) {
                Log.error("SIGHUP: reload failed: " + e);
            }
        };
        try {
            Class<?> signal = Class.forName("sun.misc.Signal");
            Class<?> handler = Class.forName("sun.misc.SignalHandler");
            Object h = java.lang.reflect.Proxy.newProxyInstance(GatewayMain.class.getClassLoader(), new Class<?>[] {handler},
                (proxy, method, margs) -> {
                    if (method.getName().equals("handle")) {
                        Thread t = new Thread(reload, "kvgate-sighup-reload");
                        t.setDaemon(true);
                        t.start();
                    }
                    return null;
                });
            Object previous = signal.getMethod("handle", signal, handler)
                .invoke(null, signal.getConstructor(String.class).newInstance("HUP"), h);
            if (previous == handler.getField("SIG_IGN").get(null)) {
                // The JVM leaves a signal the process was started ignoring (nohup, some supervisors) ignored and says
                // so only by this return value: without this line SIGHUP would do nothing, silently.
                Log.warn("SIGHUP is ignored by this process (started under nohup?): it will not reload the"
                    + " configuration; use ./kvgate ctl reload or POST /admin/v1/reload");
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            Log.warn("SIGHUP reload unavailable on this platform: " + e);
        }
    }
}
