package io.kvgate.control.config;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * A rule's {@code chat_template}: the template file its engines are launched with ({@code --chat-template FILE} on
 * vLLM and SGLang), which overrides the tokenizer directory's template for rendering and hashing. The file is read
 * when the configuration is loaded, so a reload that finds it changed is a change of the rule (its prompt pipeline is
 * rebuilt) even though the path is the same.
 *
 * @param path   the file, resolved against the configuration file's directory
 * @param source the file's content as read (UTF-8); null only inside {@link RuleConfig#read}, before the path is
 *               resolved
 */
public record ChatTemplateFile(String path, String source) {
    /** SHA-256 (hex) of the file's content. */
    public String sha256() {
        return sha256(source);
    }

    /** SHA-256 (hex) of a template text's UTF-8 bytes. */
    public static String sha256(String text) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
