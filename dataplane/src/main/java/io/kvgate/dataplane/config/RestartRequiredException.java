package io.kvgate.dataplane.config;

import java.util.List;

/** A reload changed keys that only take effect at start-up: refused (409), nothing applied. */
public final class RestartRequiredException extends Exception {
    private final List<String> fields;

    public RestartRequiredException(List<String> fields) {
        super("configuration not applied: " + String.join(", ", fields)
            + (fields.size() == 1 ? " only takes" : " only take") + " effect at start-up (restart the gateway to change "
            + (fields.size() == 1 ? "it" : "them") + ")");
        this.fields = List.copyOf(fields);
    }

    public List<String> fields() {
        return fields;
    }
}
