package io.kvgate.dataplane.engine;

/** Which of the two proxied completion routes an engine says it mounts. */
public record MountedRoutes(boolean chat, boolean completions) {
    /** The two routes' paths, as every engine mounts them. */
    public static final String CHAT_PATH = "/v1/chat/completions";
    public static final String COMPLETIONS_PATH = "/v1/completions";
    public static final MountedRoutes BOTH = new MountedRoutes(true, true);
    public static final MountedRoutes NONE = new MountedRoutes(false, false);
}
