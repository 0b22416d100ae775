package io.kvgate.dataplane.config;

import java.util.List;

/** What an accepted reload did: {@code applied=false} when the configuration was already in effect (a no-op). */
public record ReloadOutcome(boolean applied, long version, String digest, List<String> changes) {}
