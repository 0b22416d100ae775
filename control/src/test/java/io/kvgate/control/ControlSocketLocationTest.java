package io.kvgate.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The one rule serve binds by and ctl searches by: each environment case, and that both sides meet. */
class ControlSocketLocationTest {
    private static final Path RUN = Path.of("/run/kvgate/kvgate.sock");
    private static final Path TMP = Path.of("/tmp/kvgate-1000/kvgate.sock");

    @Test
    void systemdRuntimeDirectoryComesFirst() {
        Map<String, String> env = Map.of("RUNTIME_DIRECTORY", "/run/kvgate-a:/run/other", "XDG_RUNTIME_DIR", "/run/user/1000");
        assertEquals(List.of(Path.of("/run/kvgate-a/kvgate.sock"), RUN, Path.of("/run/user/1000/kvgate/kvgate.sock"), TMP),
            ControlSocketLocation.candidates(env, 1000));
        assertEquals(Path.of("/run/kvgate-a/kvgate.sock"), ControlSocketLocation.forServer(env, 1000, d -> true));
    }

    @Test
    void rootOrAServiceUserOwningRunKvgateGetsIt() {
        assertEquals(RUN, ControlSocketLocation.forServer(Map.of(), 0, d -> d.equals(RUN.getParent())));
    }

    @Test
    void aLoginSessionUsesXdgRuntimeDir() {
        Map<String, String> env = Map.of("XDG_RUNTIME_DIR", "/run/user/1000");
        Path xdg = Path.of("/run/user/1000/kvgate/kvgate.sock");
        assertEquals(xdg, ControlSocketLocation.forServer(env, 1000, d -> d.startsWith("/run/user")));
        assertEquals(Optional.of(xdg), ControlSocketLocation.forClient(env, 1000, xdg::equals));
    }

    @Test
    void nothingElseUsableFallsBackToTmpPerUid() {
        assertEquals(TMP, ControlSocketLocation.forServer(Map.of(), 1000, d -> false));
        assertEquals(Optional.of(TMP), ControlSocketLocation.forClient(Map.of(), 1000, TMP::equals));
    }

    @Test
    void aRelativeOrBlankXdgRuntimeDirIsIgnored() {
        assertEquals(List.of(RUN, TMP), ControlSocketLocation.candidates(Map.of("XDG_RUNTIME_DIR", "run/user"), 1000));
        assertEquals(List.of(RUN, TMP), ControlSocketLocation.candidates(Map.of("RUNTIME_DIRECTORY", " "), 1000));
    }

    @Test
    void clientFindsNothingWhenNoSocketExists() {
        assertTrue(ControlSocketLocation.forClient(Map.of(), 1000, p -> false).isEmpty());
    }

    @Test
    void whereServerBindsIsWhereClientLooksForEveryUsableSet() {
        // Whichever directories are usable, ctl (seeing only the socket serve made) finds exactly that path.
        Map<String, String> env = Map.of("XDG_RUNTIME_DIR", "/run/user/1000");
        List<Path> dirs = ControlSocketLocation.candidates(env, 1000).stream().map(Path::getParent).toList();
        for (int mask = 0; mask < 1 << dirs.size(); mask++) {
            int m = mask;
            Path bound = ControlSocketLocation.forServer(env, 1000, d -> (m & 1 << dirs.indexOf(d)) != 0);
            assertEquals(Optional.of(bound), ControlSocketLocation.forClient(env, 1000, bound::equals), "mask " + mask);
        }
    }

    @Test
    void writableOrCreatableReadsTheFileSystem(@TempDir Path dir) throws Exception {
        assertTrue(ControlSocketLocation.writableOrCreatable(dir));
        assertTrue(ControlSocketLocation.writableOrCreatable(dir.resolve("new")));
        assertFalse(ControlSocketLocation.writableOrCreatable(dir.resolve("no/such/parent")));
        Path locked = Files.createDirectory(dir.resolve("locked"),
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("r-x------")));
        Path foreign = Files.createDirectory(dir.resolve("foreign"),
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwxrwxrwx")));
        if (ControlSocketLocation.currentUid() == 0) {
            // root writes anywhere, so the mode case means nothing for it; it can give a directory away, though
            Files.setAttribute(foreign, "unix:uid", 12345);
            assertFalse(ControlSocketLocation.writableOrCreatable(foreign), "a directory another user made");
        } else {
            assertFalse(ControlSocketLocation.writableOrCreatable(locked));
            assertFalse(ControlSocketLocation.writableOrCreatable(locked.resolve("sub")));
        }
        Files.setPosixFilePermissions(locked, PosixFilePermissions.fromString("rwx------")); // so @TempDir can delete it
    }
}
