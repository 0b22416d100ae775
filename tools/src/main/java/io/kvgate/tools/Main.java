package io.kvgate.tools;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Entry point of the {@code ./kvgate} launcher. Each sub-command is a class with a
 * {@code public static int run(String[] args)} method that returns the process exit code; the table below is the
 * only place that names them, so adding a command never touches another command's code.
 */
public final class Main {
    private record Command(String className, String summary) {}

    private static final Map<String, Command> COMMANDS = new LinkedHashMap<>();

    static {
        COMMANDS.put("demo", new Command("io.kvgate.tools.demo.DemoCommand",
            "start an embedded simulated fleet and the gateway, drive traffic, print what happened"));
        COMMANDS.put("serve", new Command("io.kvgate.dataplane.GatewayMain", "run the gateway: serve --config FILE"));
        COMMANDS.put("sim", new Command("io.kvgate.tools.sim.SimulatorMain",
            "run an engine simulator: sim --dialect vllm|sglang --port P --model NAME ..."));
        COMMANDS.put("bench", new Command("io.kvgate.tools.bench.BenchMain",
            "open-loop load generator: bench --target URL --model M --workload ... --rate R --duration S"));
        COMMANDS.put("hash", new Command("io.kvgate.tools.cli.HashCommand",
            "print block keys: hash --engine vllm|vllm-xxhash|sglang --seed S --block-size B --tokens 1,2,3"));
        COMMANDS.put("render", new Command("io.kvgate.tools.cli.RenderCommand",
            "render a chat request from stdin: render --model-dir DIR"));
        COMMANDS.put("ctl", new Command("io.kvgate.tools.cli.ControlCommand",
            "talk to a running gateway's admin API: ctl inventory|lookup|explain|... (see ctl --help)"));
    }

    private Main() {}

    public static void main(String[] args) {
        System.exit(run(args));
    }

    static int run(String[] args) {
        if (args.length == 0 || args[0].equals("help") || args[0].equals("--help") || args[0].equals("-h")) {
            usage();
            return args.length == 0 ? 2 : 0;
        }
        Command command = COMMANDS.get(args[0]);
        if (command == null) {
            System.err.println("kvgate: unknown command '" + args[0] + "'");
            usage();
            return 2;
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        try {
            Method run = Class.forName(command.className()).getMethod("run", String[].class);
            return (Integer) run.invoke(null, (Object) rest);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            System.err.println("kvgate " + args[0] + ": " + cause);
            cause.printStackTrace(System.err);
            return 1;
        } catch (ReflectiveOperationException e) {
            System.err.println("kvgate " + args[0] + ": this build does not include the command (" + e + ")");
            return 1;
        }
    }

    private static void usage() {
        System.err.println("usage: ./kvgate <command> [options]\n\ncommands:");
        COMMANDS.forEach((name, c) -> System.err.printf("  %-8s %s%n", name, c.summary()));
        System.err.printf("  %-8s %s%n", "test", "run the test suite (./mvnw verify)");
        System.err.printf("  %-8s %s%n", "build", "build without tests");
        System.err.printf("  %-8s %s%n", "jmh", "run JMH benchmarks (perf/jmh.sh)");
    }
}
