package io.kvgate.tools;

import io.kvgate.control.BuildInfo;
import io.kvgate.dataplane.GatewayMain;
import io.kvgate.epp.check.EppCheck;
import io.kvgate.tools.bench.BenchMain;
import io.kvgate.tools.cli.ControlCommand;
import io.kvgate.tools.cli.HashCommand;
import io.kvgate.tools.cli.RenderCommand;
import io.kvgate.tools.demo.DemoCommand;
import io.kvgate.tools.sim.SimulatorMain;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.AutoComplete;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;

/**
 * Entry point of the {@code ./kvgate} launcher. Each sub-command is a {@code static int run(String[] args)} method that
 * returns the process exit code; the table below is the only place that names them, so adding a command never touches
 * another command's code, and "who calls {@code GatewayMain.run}?" has its answer here.
 */
public final class Main {
    /** A command's entry point: the arguments after its name in, the process exit code out. */
    @FunctionalInterface
    interface CommandRun {
        int run(String[] args) throws Exception;
    }

    private record Command(CommandRun run, String summary) {}

    private static final Map<String, Command> COMMANDS = new LinkedHashMap<>();

    static {
        COMMANDS.put("demo", new Command(DemoCommand::run,
            "start an embedded simulated fleet and the gateway, drive traffic, print what happened"));
        COMMANDS.put("serve", new Command(GatewayMain::run, "run the gateway: serve --config FILE"));
        COMMANDS.put("sim", new Command(SimulatorMain::run,
            "run an engine simulator: sim --dialect vllm|sglang --port P --model NAME ..."));
        COMMANDS.put("bench", new Command(BenchMain::run,
            "open-loop load generator: bench --target URL --model M --workload ... --rate R --duration S"));
        COMMANDS.put("hash", new Command(HashCommand::run,
            "print block keys: hash --engine vllm|vllm-xxhash|sglang --seed S --block-size B --tokens 1,2,3"));
        COMMANDS.put("render", new Command(RenderCommand::run,
            "render a chat request from stdin: render --model-dir DIR"));
        COMMANDS.put("ctl", new Command(ControlCommand::run,
            "talk to a running gateway's admin API: ctl inventory|lookup|explain|... (see ctl --help)"));
        COMMANDS.put("epp-check", new Command(EppCheck::run,
            "check an endpoint picker against the Inference Extension protocol: epp-check --target HOST:PORT --model M"));
    }

    /** Commands answered outside the table: version and completion here, test/build/dist/jmh by the launcher script. */
    private static final List<String> OTHER_COMMANDS = List.of("version", "completion", "test", "build", "dist", "jmh");

    private Main() {}

    /** Every command name, as the launcher's own help (for an unbuilt tree) must list them too. */
    public static List<String> commandNames() {
        List<String> all = new java.util.ArrayList<>(COMMANDS.keySet());
        all.addAll(OTHER_COMMANDS);
        return List.copyOf(all);
    }

    public static void main(String[] args) {
        System.exit(run(args));
    }

    static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    /**
     * Exit codes, the same for every command: 0 done, 1 a runtime failure, 2 a usage error (unknown command or option,
     * usage on stderr); help asked for ({@code help}, {@code -h}, {@code --help}) goes to stdout with 0.
     */
    static int run(String[] args, PrintStream out, PrintStream err) {
        if (args.length == 0) {
            usage(err);
            return 2;
        }
        switch (args[0]) {
            case "help", "--help", "-h" -> {
                usage(out);
                return 0;
            }
            case "version", "--version", "-V" -> {
                out.println(BuildInfo.current().describe());
                return 0;
            }
            case "completion" -> {
                return completion(Arrays.copyOfRange(args, 1, args.length), out, err);
            }
            default -> { }
        }
        Command command = COMMANDS.get(args[0]);
        if (command == null) {
            err.println("kvgate: unknown " + (args[0].startsWith("-") ? "option" : "command") + " '" + args[0] + "'");
            usage(err);
            return 2;
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        try {
            return command.run().run(rest);
        } catch (Exception e) {
            err.println("kvgate " + args[0] + ": " + e);
            e.printStackTrace(err);
            return 1;
        }
    }

    /** {@code completion bash}: picocli's generator over the command table (ctl with its verbs and options). */
    static int completion(String[] args, PrintStream out, PrintStream err) {
        if (args.length == 1 && (args[0].equals("-h") || args[0].equals("--help"))) {
            out.println("usage: kvgate completion bash   (source it: source <(kvgate completion bash); works in zsh too"
                + " after autoload -U +X bashcompinit && bashcompinit)");
            return 0;
        }
        if (args.length != 1 || !args[0].equals("bash")) {
            err.println("usage: kvgate completion bash");
            return 2;
        }
        out.print(AutoComplete.bash("kvgate", new CommandLine(commandTree())));
        return 0;
    }

    /** The command tree completion sees: every command of the table and the launcher's own. */
    static CommandSpec commandTree() {
        CommandSpec top = CommandSpec.create().name("kvgate");
        top.addOption(OptionSpec.builder("-h", "--help").usageHelp(true).build());
        top.addOption(OptionSpec.builder("-V", "--version").versionHelp(true).build());
        for (var e : COMMANDS.entrySet()) {
            top.addSubcommand(e.getKey(), e.getKey().equals("ctl") ? ControlCommand.spec() : fromHelp(e.getKey(), e.getValue()));
        }
        for (String name : OTHER_COMMANDS) {
            top.addSubcommand(name, helpOnly(name));
        }
        return top;
    }

    /**
     * A command's options for completion, read from its own {@code --help} (the options it documents are the ones it
     * takes), so the completion script needs no second list of them. Runs the command's help in this JVM: only the
     * {@code completion} command does, in a process of its own.
     */
    private static CommandSpec fromHelp(String name, Command command) {
        CommandSpec c = helpOnly(name);
        PrintStream realOut = System.out;
        ByteArrayOutputStream help = new ByteArrayOutputStream();
        try (PrintStream capture = new PrintStream(help, true, StandardCharsets.UTF_8)) {
            System.setOut(capture);
            command.run().run(new String[] {"--help"});
        } catch (Exception e) {
            return c; // a command whose help failed: complete its name only
        } finally {
            System.setOut(realOut);
        }
        Matcher m = OPTION_IN_HELP.matcher(help.toString(StandardCharsets.UTF_8));
        Set<String> seen = new TreeSet<>(Set.of("-h", "--help"));
        while (m.find()) {
            if (seen.add(m.group(1))) {
                c.addOption(OptionSpec.builder(m.group(1)).arity("0").type(boolean.class).build());
            }
        }
        return c;
    }

    private static final Pattern OPTION_IN_HELP = Pattern.compile("(?<![\\w-])(--[a-z][a-z0-9-]*)");

    private static CommandSpec helpOnly(String name) {
        CommandSpec c = CommandSpec.create().name(name);
        c.addOption(OptionSpec.builder("-h", "--help").usageHelp(true).build());
        return c;
    }

    private static void usage(PrintStream to) {
        to.println("usage: ./kvgate [--help | --version] <command> [options]   (./kvgate <command> --help for its options)"
            + "\n\ncommands:");
        COMMANDS.forEach((name, c) -> to.printf("  %-10s %s%n", name, c.summary()));
        to.printf("  %-10s %s%n", "version", "print the version (as --version)");
        to.printf("  %-10s %s%n", "completion", "print a shell completion script: completion bash");
        to.printf("  %-10s %s%n", "test", "run the test suite (./mvnw verify)");
        to.printf("  %-10s %s%n", "build", "build without tests");
        to.printf("  %-10s %s%n", "dist", "build the release tarball target/kvgate-<version>.tar.gz");
        to.printf("  %-10s %s%n", "jmh", "run JMH benchmarks (perf/jmh.sh)");
    }
}
