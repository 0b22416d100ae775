package io.kvgate.tools.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** NOTICE names every third-party jar the release ships (lib/ is tools/target/lib plus kvgate's own jar). */
class NoticePackagedTest {
    /** artifactId-version[-classifier].jar: the artifactId is everything before the first "-<digit>". */
    private static final Pattern JAR = Pattern.compile("(.+?)-\\d.*\\.jar");

    static String artifactId(String jarName) {
        Matcher m = JAR.matcher(jarName);
        return m.matches() ? m.group(1) : jarName;
    }

    @Test
    void artifactIdIsReadFromTheJarName() {
        assertEquals("netty-transport-native-epoll", artifactId("netty-transport-native-epoll-4.2.18.Final-linux-x86_64.jar"));
        assertEquals("HdrHistogram", artifactId("HdrHistogram-2.2.2.jar"));
        assertEquals("zero-allocation-hashing", artifactId("zero-allocation-hashing-0.27ea1.jar"));
    }

    @Test
    void everyShippedThirdPartyJarIsNamedInNotice() throws Exception {
        Packaged.requireBuilt();
        String notice = Files.readString(Launched.REPO.resolve("NOTICE"));
        List<String> jars;
        try (Stream<Path> s = Files.list(Packaged.LIB)) {
            jars = s.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".jar") && !n.startsWith("kvgate-")).sorted().toList();
        }
        assertFalse(jars.isEmpty(), "tools/target/lib has no jars");
        List<String> missing = jars.stream().filter(j -> !notice.contains(":" + artifactId(j) + " ")).toList();
        assertTrue(missing.isEmpty(), "NOTICE does not name " + missing + ": add a line (groupId:artifactId version licence)");
    }

    @Test
    void noticeNamesTheShippedTokenizersAndTheirLicences() throws Exception {
        String notice = Files.readString(Launched.REPO.resolve("NOTICE"));
        try (Stream<Path> models = Files.list(Launched.REPO.resolve("deploy/models"))) {
            for (Path m : models.filter(Files::isDirectory).toList()) {
                assertTrue(notice.contains("models/" + m.getFileName()), "NOTICE does not name deploy/models/" + m.getFileName());
            }
        }
        assertTrue(notice.contains("Llama 3.1 Community License"));
        assertTrue(Files.readString(Launched.REPO.resolve("LICENSE")).contains("Apache License\n                           Version 2.0"));
    }
}
