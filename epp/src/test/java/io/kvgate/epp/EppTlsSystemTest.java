package io.kvgate.epp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.epp.check.EppCheck;
import io.kvgate.tools.sim.EngineSimulator;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code epp_tls}: the picker over TLS (ALPN h2) with a required client certificate. {@code epp-check --tls} with a
 * certificate of the trusted CA passes every requirement; a client certificate of another CA, no client certificate,
 * and a cleartext client all fail (the handshake, so nothing is answered: every requirement FAILs, exit 1). Keys that
 * cannot work are refused at start naming the key. Certificates are minted with the {@code openssl} command, as the
 * client listener's TLS tests do (their {@code TestPki} is a dataplane test class, not shipped in a test jar).
 */
@Tag("system")
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class EppTlsSystemTest {
    @TempDir
    static Path dir;
    static Path ca;
    static Path rogueCa;

    @BeforeAll
    static void mint() throws Exception {
        ca = caCert("ca", "kvgate epp test CA");
        rogueCa = caCert("rogue-ca", "someone else's CA");
        leaf("ca", "server", "kvgate-epp", "IP:127.0.0.1,DNS:localhost");
        leaf("ca", "envoy", "envoy", null);
        leaf("rogue-ca", "rogue", "envoy", null);
    }

    private static Path caCert(String name, String cn) throws Exception {
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            dir.resolve(name + ".key").toString(), "-out", dir.resolve(name + ".pem").toString(), "-days", "2", "-subj", "/CN=" + cn);
        return dir.resolve(name + ".pem");
    }

    /** A leaf signed by {@code caName}, good for server and client authentication, as NAME.pem / NAME.key (PKCS#8). */
    private static void leaf(String caName, String name, String cn, String san) throws Exception {
        Path ext = dir.resolve(name + ".ext");
        Files.writeString(ext, "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
            + "extendedKeyUsage=serverAuth,clientAuth\n" + (san == null ? "" : "subjectAltName=" + san + "\n"));
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            dir.resolve(name + ".key").toString(), "-out", dir.resolve(name + ".csr").toString(), "-subj", "/CN=" + cn);
        openssl("x509", "-req", "-in", dir.resolve(name + ".csr").toString(), "-CA", dir.resolve(caName + ".pem").toString(),
            "-CAkey", dir.resolve(caName + ".key").toString(), "-set_serial", "0x" + Integer.toHexString(name.hashCode() & 0xffffff),
            "-days", "2", "-out", dir.resolve(name + ".pem").toString(), "-extfile", ext.toString());
    }

    private static void openssl(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("openssl"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "openssl did not finish");
        assertEquals(0, p.exitValue(), "openssl " + cmd + ": " + out);
    }

    private static String yaml(EngineSimulator sim, String tls) {
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            epp_listen: 127.0.0.1:0
            api_keys: [epp-key]
            health: {interval_ms: 60000}
            %s
            rules:
              - name: chat
                models: [m]
                policy: round_robin
                endpoints:
                  - url: %s
            """.formatted(tls, sim.baseUrl());
    }

    private static String tlsYaml(String cert, String key, Path clientCa) {
        return "epp_tls: {cert_file: " + dir.resolve(cert + ".pem") + ", key_file: " + dir.resolve(key + ".key")
            + (clientCa == null ? "" : ", client_ca_file: " + clientCa) + "}";
    }

    /** epp-check's exit status and what it printed (stdout then stderr). */
    private record Run(int exit, String printed) {}

    private static Run check(int port, String... extra) {
        List<String> args = new ArrayList<>(List.of("--target", "127.0.0.1:" + port, "--model", "m", "--header",
            "Authorization: Bearer epp-key", "--timeout-ms", "15000"));
        args.addAll(List.of(extra));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int exit = EppCheck.run(args.toArray(String[]::new), new PrintStream(out, true, StandardCharsets.UTF_8),
            new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Run(exit, out.toString(StandardCharsets.UTF_8) + err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void theTrustedClientPassesEveryRequirementAndAnUntrustedOneFailsTheHandshake() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(EppCheckSystemTest.fast());
             Gateway g = Gateway.start(GatewayConfig.parse(yaml(a, tlsYaml("server", "server", ca))))) {
            int port = g.eppPort();
            Run trusted = check(port, "--tls", "--ca", ca.toString(), "--cert", dir.resolve("envoy.pem").toString(),
                "--key", dir.resolve("envoy.key").toString());
            assertEquals(0, trusted.exit(), trusted.printed());
            assertTrue(trusted.printed().contains("PASS  pick.decision") && trusted.printed().contains("requirements pass"),
                trusted.printed());

            Run rogue = check(port, "--tls", "--ca", ca.toString(), "--cert", dir.resolve("rogue.pem").toString(),
                "--key", dir.resolve("rogue.key").toString());
            assertEquals(1, rogue.exit(), rogue.printed());
            assertTrue(rogue.printed().contains("FAIL  health.liveness") && rogue.printed().contains("UNAVAILABLE"),
                "a client certificate of another CA: the handshake fails: " + rogue.printed());

            Run anonymous = check(port, "--tls", "--ca", ca.toString());
            assertEquals(1, anonymous.exit(), anonymous.printed());
            assertTrue(anonymous.printed().contains("FAIL  health.liveness"), "no client certificate: " + anonymous.printed());

            Run cleartext = check(port);
            assertEquals(1, cleartext.exit(), cleartext.printed());
            assertTrue(cleartext.printed().contains("FAIL  health.liveness"), "cleartext on the TLS port: " + cleartext.printed());

            Run distrusting = check(port, "--tls", "--ca", rogueCa.toString(), "--cert", dir.resolve("envoy.pem").toString(),
                "--key", dir.resolve("envoy.key").toString());
            assertEquals(1, distrusting.exit(), "the client does not trust the picker's CA: " + distrusting.printed());
        }
    }

    @Test
    void withoutClientCaAnyTlsClientIsServed() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(EppCheckSystemTest.fast());
             Gateway g = Gateway.start(GatewayConfig.parse(yaml(a, tlsYaml("server", "server", null))))) {
            Run r = check(g.eppPort(), "--tls", "--ca", ca.toString());
            assertEquals(0, r.exit(), r.printed());
        }
    }

    @Test
    void keysThatCannotWorkAreRefusedNamingTheKey() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(EppCheckSystemTest.fast())) {
            // The server's certificate with the client's key: refused at start, the picker never serves.
            Exception wrongKey = assertThrows(Exception.class,
                () -> Gateway.start(GatewayConfig.parse(yaml(a, tlsYaml("server", "envoy", null)))).close());
            assertTrue(String.valueOf(wrongKey.getMessage()).contains("epp_tls.key_file"), wrongKey.toString());

            ConfigException noPicker = assertThrows(ConfigException.class, () -> GatewayConfig.parse(
                yaml(a, tlsYaml("server", "server", null)).replace("epp_listen: 127.0.0.1:0\n", "")));
            assertTrue(noPicker.getMessage().contains("epp_tls") && noPicker.getMessage().contains("applies only with epp_listen"),
                noPicker.getMessage());

            ConfigException missing = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml(a,
                "epp_tls: {cert_file: " + dir.resolve("nope.pem") + ", key_file: " + dir.resolve("server.key") + "}")));
            assertTrue(missing.getMessage().contains("cert_file") && missing.getMessage().contains("is not a readable file"),
                missing.getMessage());
        }

        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
        assertEquals(2, EppCheck.run(new String[] {"--target", "127.0.0.1:1", "--model", "m", "--ca", ca.toString()}, System.out, e));
        assertEquals(2, EppCheck.run(new String[] {"--target", "127.0.0.1:1", "--model", "m", "--tls", "--cert", ca.toString()},
            System.out, e));
        String text = err.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("--ca, --cert and --key need --tls") && text.contains("--cert and --key go together"), text);
    }
}
