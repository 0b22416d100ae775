package io.kvgate.control.config;

import java.util.List;

/** A configuration that cannot be applied; {@link #problems()} names each field, its value and the rule broken. */
public final class ConfigException extends Exception {
    private final List<String> problems;

    public ConfigException(List<String> problems) {
        super(problems.size() == 1 ? problems.get(0)
            : "invalid configuration (" + problems.size() + " problems):\n  - " + String.join("\n  - ", problems));
        this.problems = List.copyOf(problems);
    }

    public ConfigException(String problem) {
        this(List.of(problem));
    }

    public List<String> problems() {
        return problems;
    }
}
