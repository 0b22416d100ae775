package io.kvgate.dataplane;

import io.kvgate.control.ControlSocketLocation;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.log.Log;
import io.kvgate.control.log.LogSetup;
import io.kvgate.dataplane.config.ConfigCheck;
import io.kvgate.dataplane.config.MemoryBudget;
import io.kvgate.dataplane.config.ReloadOutcome;
import io.kvgate.dataplane.config.RestartRequiredException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

/**
 * {@code ./kvgate serve --config FILE [--check]}: run the gateway until SIGTERM or SIGINT, then shut down as
 * {@link ShutdownSequence} does (not ready at once, serving for {@code shutdown.drain_delay_ms}, then draining) and
 * exit 0. SIGHUP reloads FILE. {@code --check} runs exactly the checks start-up and reload run ({@link ConfigCheck})
 * and prints the configuration's memory budget ({@link MemoryBudget}).
 *
 * <p>Exit status: 0 after a signal's shutdown (or a valid {@code --check}); {@value #EX_CONFIG} (sysexits'
 * EX_CONFIG) for a configuration that cannot be applied, every problem printed, so a supervisor can tell it from a
 * crash and not restart it ({@code RestartPreventExitStatus=78}); 2 for a wrong command line; 1 when the gateway
 * cannot start for another reason (a port in use).
 */
public final class GatewayMain {
    /** The configuration cannot be applied: restarting will not help (sysexits.h EX_CONFIG). */
    public static final int EX_CONFIG = 78;
    /** {@code --drain-ms}'s default: how long requests in flight may take once the listener is closed. */
    static final long DEFAULT_DRAIN_MS = 30_000;

    private GatewayMain() {}

    public static int run(String[] args) throws Exception {
        return run(args, System.out);
    }

    /** As {@link #run(String[])}, writing what {@code --check} prints to {@code out}. */
    static int run(String[] args, PrintStream out) throws Exception {
        return run(args, out, System.err);
    }

    /** As {@link #run(String[], PrintStream)}, writing why it cannot start to {@code err}. */
    static int run(String[] args, PrintStream out, PrintStream err) throws Exception {
        String config = null;
        boolean check = false;
        long drainMs = DEFAULT_DRAIN_MS;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--config", "-c" -> config = i + 1 < args.length ? args[++i] : null;
                case "--check" -> check = true;
                case "--drain-ms" -> {
                    try {
                        drainMs = Long.parseLong(i + 1 < args.length ? args[++i] : "");
                    } catch (NumberFormatException e) {
                        err.println("kvgate serve: --drain-ms needs a number of milliseconds");
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
                    err.println("kvgate serve: unknown option '" + args[i] + "' (see --help)");
                    return 2;
                }
            }
        }
        if (config == null) {
            err.println("kvgate serve: --config FILE is required");
            return 2;
        }
        Path file = Path.of(config).toAbsolutePath();
        GatewayConfig cfg;
        try {
            cfg = ConfigCheck.load(file);
        } catch (ConfigException e) {
            err.println("kvgate: " + config + ": " + e.getMessage());
            return EX_CONFIG;
        }
        if (check) {
            out.println("configuration OK: " + cfg.rules().size() + " rule(s)");
            int ioThreads = cfg.ioThreads() > 0 ? cfg.ioThreads() : Math.max(1, Runtime.getRuntime().availableProcessors());
            MemoryBudget.of(cfg, ioThreads).report(hostMemoryBytes()).forEach(out::println);
            return 0;
        }
        LogSetup.configure(cfg.logging().format(), cfg.logging().level());
        Path socket = controlSocketPath(cfg, file);
        Gateway gw;
        try {
            gw = Gateway.start(new Gateway.Options(cfg, NanoClock.SYSTEM, file, socket));
        } catch (ConfigException e) { // what only start-up can tell (a tokenizer that does not load)
            err.println("kvgate: " + config + ": " + e.getMessage());
            return EX_CONFIG;
        }
        installReloadOnSighup(gw); // before the line that says it serves: a SIGHUP after it reloads, never kills
        final long drain = drainMs;
        CountDownLatch stopAsked = new CountDownLatch(1);
        boolean signalsHandled = onSignal("TERM", () -> stop(gw, stopAsked, drain)) & onSignal("INT", () -> stop(gw, stopAsked, drain));
        CountDownLatch stopped = new CountDownLatch(1);
        // Any other way out (System.exit, or a signal this platform would not let us handle): drain without a delay.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (stopAsked.getCount() > 0) {
                Log.info("exiting: draining (up to " + drain + " ms)");
                gw.close(drain);
            }
            LogSetup.shutdown(); // last: the asynchronous loggers' queue is written before the JVM exits
            stopped.countDown();
        }, "kvgate-shutdown"));
        Log.info("serving on " + cfg.listen().host() + ":" + gw.port() + " (" + gw.transportName()
            + "), admin on " + cfg.adminListen().host() + ":" + gw.adminPort()
            + (socket == null ? ", no control socket" : ", control socket " + socket));
        if (!signalsHandled) {
            stopped.await(); // the JVM's own handling: hooks run, the process exits 128+signal
            return 0;
        }
        stopAsked.await();
        gw.shutdown(gw.config().shutdown().drainDelayMs(), drain).run(20);
        Log.info("stopped");
        return 0;
    }

    /** SIGTERM/SIGINT: the first starts the shutdown (on the main thread); another skips what is left of its delay. */
    private static void stop(Gateway gw, CountDownLatch stopAsked, long drainMs) {
        if (stopAsked.getCount() > 0) {
            stopAsked.countDown();
        } else {
            Log.info("second stop signal: not waiting for balancers any longer");
            gw.shutdown(gw.config().shutdown().drainDelayMs(), drainMs).skipDelay();
        }
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
     * SIGHUP → reload the --config file, on a fresh thread (never on the signal thread).
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
        Object previous = handle("HUP", () -> {
            Thread t = new Thread(reload, "kvgate-sighup-reload");
            t.setDaemon(true);
            t.start();
        });
        if (previous == IGNORED) {
            // The JVM leaves a signal the process was started ignoring (nohup, some supervisors) ignored and says
            // so only by this return value: without this line SIGHUP would do nothing, silently.
            Log.warn("SIGHUP is ignored by this process (started under nohup?): it will not reload the"
                + " configuration; use ./kvgate ctl reload or POST /admin/v1/reload");
        }
    }

    /**
     * Runs {@code action} on each {@code signal} instead of the JVM's default (for TERM and INT: exit 128+signal
     * through the shutdown hooks). False when this platform cannot; a signal the process was started ignoring
     * stays ignored (a background job's SIGINT) and counts as handled.
     */
    private static boolean onSignal(String signal, Runnable action) {
        Object previous = handle(signal, action);
        return previous != null;
    }

    /** What {@link #handle} returns for a signal the process was started ignoring. */
    private static final Object IGNORED = new Object();

    /**
     * Installs {@code action} (run on the JVM's signal thread: it must return quickly) for {@code signal}; returns the
     * previous handler, {@link #IGNORED}, or null when the platform would not. The JDK's signal API is reached
     * reflectively: it is internal (jdk.unsupported) and javac would warn on every direct use.
     */
    private static Object handle(String signal, Runnable action) {
        try {
            Class<?> signalClass = Class.forName("sun.misc.Signal");
            Class<?> handler = Class.forName("sun.misc.SignalHandler");
            Object h = java.lang.reflect.Proxy.newProxyInstance(GatewayMain.class.getClassLoader(), new Class<?>[] {handler},
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
