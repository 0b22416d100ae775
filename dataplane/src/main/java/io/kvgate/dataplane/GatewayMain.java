package io.kvgate.dataplane;

import io.kvgate.control.ControlSocketLocation;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.log.Log;
import io.kvgate.control.log.LogSetup;
import io.kvgate.dataplane.config.ConfigCheck;
import io.kvgate.dataplane.config.MemoryBudget;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;

/**
 * {@code ./kvgate serve --config FILE [--check]}: run the gateway until SIGTERM or SIGINT, then shut down as
 * {@link ShutdownSequence} does (not ready at once, serving for {@code shutdown.drain_delay_ms}, then draining) and
 * exit 0 ({@link StopSignals}). SIGHUP reloads FILE ({@link SignalReload}). {@code --check} runs exactly the checks start-up and reload run ({@link ConfigCheck})
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
        SignalReload.install(gw); // before the line that says it serves: a SIGHUP after it reloads, never kills
        StopSignals stop = StopSignals.install(gw, drainMs);
        Log.info("serving on " + cfg.listen().host() + ":" + gw.port() + " (" + gw.transportName()
            + "), admin on " + cfg.adminListen().host() + ":" + gw.adminPort()
            + (socket == null ? ", no control socket" : ", control socket " + socket));
        if (stop.awaitStop()) {
            gw.shutdown(gw.config().shutdown().drainDelayMs(), drainMs).run(20);
            Log.info("stopped");
        }
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
}
