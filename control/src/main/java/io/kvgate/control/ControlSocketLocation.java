package io.kvgate.control;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Predicate;

/**
 * The one rule for where the control socket lives when {@code control_socket} (gateway) or {@code --socket} /
 * {@code $KVGATE_SOCKET} (ctl) does not say: {@code serve} binds in the first usable directory of
 * {@link #candidates}, and {@code ctl} connects to the first of the same list where a socket file exists. Before this
 * rule, a non-root gateway fell back to the configuration file's directory, which ctl never looked in.
 *
 * <p>Order: {@code $RUNTIME_DIRECTORY} (systemd's RuntimeDirectory=kvgate), {@code /run/kvgate} (root or a service
 * user that owns it), {@code $XDG_RUNTIME_DIR/kvgate} (a login session), {@code /tmp/kvgate-UID} (anything else).
 * When no earlier directory is usable the /tmp one is taken as is: if another user made it first, binding there fails
 * with that directory's permission error rather than silently going elsewhere.
 */
public final class ControlSocketLocation {
    public static final String FILE_NAME = "kvgate.sock";
    static final Path SYSTEM_DIR = Path.of("/run/kvgate");

    private ControlSocketLocation() {}

    /** The directories to try, most specific first, as {@code env} and {@code uid} make them. */
    public static List<Path> candidates(Map<String, String> env, int uid) {
        List<Path> dirs = new ArrayList<>(4);
        String runtime = env.get("RUNTIME_DIRECTORY");
        if (runtime != null && !runtime.isBlank()) {
            // systemd joins several RuntimeDirectory= entries with ':'; kvgate's unit names one.
            dirs.add(Path.of(runtime.split(":")[0]));
        }
        dirs.add(SYSTEM_DIR);
        String xdg = env.get("XDG_RUNTIME_DIR");
        if (xdg != null && !xdg.isBlank() && Path.of(xdg).isAbsolute()) {
            dirs.add(Path.of(xdg, "kvgate"));
        }
        dirs.add(Path.of("/tmp", "kvgate-" + uid));
        return dirs.stream().map(d -> d.resolve(FILE_NAME)).toList();
    }

    /**
     * Where {@code serve} binds: the first candidate whose directory {@code canCreateIn} accepts. The last candidate
     * (under /tmp) is always taken, so this never comes back empty.
     */
    public static Path forServer(Map<String, String> env, int uid, Predicate<Path> canCreateIn) {
        List<Path> all = candidates(env, uid);
        for (Path p : all.subList(0, all.size() - 1)) {
            if (canCreateIn.test(p.getParent())) {
                return p;
            }
        }
        return all.getLast();
    }

    /** Where {@code ctl} connects: the first candidate that exists ({@code exists} is the file test, injected by tests). */
    public static Optional<Path> forClient(Map<String, String> env, int uid, Predicate<Path> exists) {
        return candidates(env, uid).stream().filter(exists).findFirst();
    }

    /**
     * The real "can the gateway put its socket here" test: the directory is ours and writable, or can be made in a
     * writable parent. Ours: a /tmp/kvgate-UID made in advance by another user could otherwise hold our socket.
     */
    public static boolean writableOrCreatable(Path dir) {
        if (Files.isDirectory(dir)) {
            return Files.isWritable(dir) && ownedBy(dir, currentUid());
        }
        Path parent = dir.getParent();
        return parent != null && Files.isDirectory(parent) && Files.isWritable(parent);
    }

    static boolean ownedBy(Path dir, int uid) {
        return uid >= 0 && uidOf(dir) == uid;
    }

    /** This process's uid (the owner of /proc/self), -1 when the platform has no /proc. */
    public static int currentUid() {
        return uidOf(Path.of("/proc/self"));
    }

    /** The owner of {@code p}, -1 when it cannot be read (no such file, no unix attribute view). */
    private static int uidOf(Path p) {
        try {
            return (Integer) Files.getAttribute(p, "unix:uid");
        } catch (java.io.IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return -1;
        }
    }
}
