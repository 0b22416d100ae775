package io.kvgate.dataplane.config;

import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.prompt.PromptPipeline;
import io.kvgate.dataplane.prompt.TokenizerCache;
import io.kvgate.dataplane.route.RuleHasher;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * The one place a configuration is accepted: {@link GatewayConfig#parse} (syntax, vocabulary, ranges, cross-field
 * rules) followed by the checks that need the index module — the rule's block hasher is built (hash seed, algorithm,
 * block size) and its tokenizer directory is loaded (tokenizer.json and chat template). Start-up, {@code serve
 * --check}, reload and {@code POST /control/v1/config/check} all go through here, so they refuse exactly the same
 * configurations. Every problem names the key path, the value and the rule; all are reported at once.
 */
public final class ConfigCheck {
    private ConfigCheck() {}

    public static GatewayConfig load(Path file) throws ConfigException {
        return conclude(GatewayConfig.load(file));
    }

    public static GatewayConfig parse(String yaml, Path baseDir) throws ConfigException {
        return conclude(GatewayConfig.parse(yaml, baseDir));
    }

    public static GatewayConfig parse(String yaml, Path baseDir, Function<String, String> env) throws ConfigException {
        return conclude(GatewayConfig.parse(yaml, baseDir, env));
    }

    /** Runs the checks that need built objects; returns {@code cfg} when it passes. */
    public static GatewayConfig conclude(GatewayConfig cfg) throws ConfigException {
        return conclude(cfg, new TokenizerCache());
    }

    /**
     * As {@link #conclude(GatewayConfig)}, loading tokenizers through the gateway's cache so the table built next
     * uses the very tokenizers this check loaded.
     */
    public static GatewayConfig conclude(GatewayConfig cfg, TokenizerCache tokenizers) throws ConfigException {
        List<String> problems = new ArrayList<>();
        for (int i = 0; i < cfg.rules().size(); i++) {
            RuleConfig r = cfg.rules().get(i);
            String where = "rules[" + i + "] (name=" + r.name() + ")";
            // Every rule, whatever its policy: a value that start-up would refuse is refused here, never later.
            try {
                new RuleHasher(r, 0);
            } catch (IllegalArgumentException e) {
                problems.add(where + ".hash_seed: value '" + r.hashSeed() + "' (hash_algo '" + r.hashAlgo() + "', block_size "
                    + r.blockSize() + ") cannot build the engines' block hasher: " + e.getMessage());
            }
            if (r.tokenizer() != null) {
                try {
                    tokenizers.load(r.tokenizer());
                } catch (RuntimeException e) {
                    problems.add(where + ".tokenizer: value '" + r.tokenizer() + "' cannot be loaded: " + rootMessage(e));
                    continue;
                }
                // The template the rule's engine renders with (its chat_template file, or the directory's) compiles.
                try {
                    PromptPipeline.forRule(r, tokenizers);
                } catch (IllegalArgumentException e) {
                    String why = String.valueOf(e.getMessage()).replaceFirst("^chat_template ", "");
                    problems.add(r.chatTemplate() != null
                        ? where + ".chat_template: value '" + r.chatTemplate().path() + "' " + why
                        : where + ".tokenizer: value '" + r.tokenizer() + "': its chat template " + why);
                }
            }
        }
        if (!problems.isEmpty()) {
            throw new ConfigException(problems);
        }
        return cfg;
    }

    private static String rootMessage(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t == e ? String.valueOf(e.getMessage()) : e.getMessage() + " (" + t.getClass().getSimpleName() + ")";
    }
}
