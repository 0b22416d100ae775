package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.client.ControlClient;
import io.kvgate.dataplane.admin.ControlSocket;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/** The control socket: owner-only file, peer uid check, the control routes, and refusals naming what was refused. */
@Timeout(60)
@Tag("system")
class ControlSocketSystemTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String CHAT = GatewayFixture.CHAT;
    @TempDir
    Path dir;
    @RegisterExtension
    final GatewayFixture fx = new GatewayFixture();
    private Gateway gw;
    private ControlClient ctl;

    @BeforeEach
    void setUp() throws Exception {
        String yaml = """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: admin-token-0123456789
            control_socket: %s
            health:
              interval_ms: 60000
            rules:
              - name: chat
                models: [qwen3]
                engine: vllm
                policy: kv_exact
                kv:
                  load_cap_factor: 1.5
                endpoints:
                  - url: %s
                  - url: %s
            """.formatted(dir.resolve("kvgate.sock"), fx.a().url(), fx.b().url());
        gw = fx.start(yaml);
        ctl = ControlClient.socket(gw.controlSocketPath());
    }


    private int chat() throws Exception {
        return fx.http().send(HttpRequest.newBuilder(fx.uri("/v1/chat/completions"))
            .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(CHAT)).build(),
            HttpResponse.BodyHandlers.ofString()).statusCode();
    }

    @Test
    void socketIsOwnerOnlyAndAnswersWithoutAToken() throws Exception {
        Path sock = dir.resolve("kvgate.sock");
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(sock)));
        ControlClient.Response r = ctl.send("GET", "/control/v1/rules", null);
        assertEquals(200, r.status(), r.body());
        JsonNode rule = JSON.readTree(r.body()).get("rules").get(0);
        assertEquals("chat", rule.get("name").asText());
        assertEquals("kv_exact", rule.get("policy").asText());
        assertEquals("single_pool", rule.get("topology").get("kind").asText());
        assertEquals("sha256_cbor", rule.get("hash_algo").asText());
        assertEquals(16, rule.get("block_size").asInt());
        assertEquals("0", rule.get("hash_seed").asText());
        assertEquals(0, rule.get("kv_subscribers").get("expected").asInt());
        // The same admin routes as HTTP (which needs the token).
        assertEquals(200, ctl.send("GET", "/admin/v1/endpoints", null).status());
        assertEquals(401, ControlClient.http("http://127.0.0.1:" + gw.adminPort(), null).send("GET", "/admin/v1/endpoints", null).status());
        assertFalse(ctl.send("GET", "/admin/v1/config", null).body().contains("admin-token-0123456789"));
    }

    @Test
    void drainUndrainAndWeightOneEndpoint() throws Exception {
        String key = fx.a().url().substring("http://".length());
        ControlClient.Response r = ctl.send("POST", "/control/v1/endpoints/" + key + "/drain", "");
        assertEquals(200, r.status(), r.body());
        for (int i = 0; i < 4; i++) {
            assertEquals(200, chat());
        }
        assertEquals(0, fx.a().requests.get(), "a drained endpoint gets no new request");
        assertEquals(4, fx.b().requests.get());
        assertTrue(ctl.send("GET", "/admin/v1/endpoints", null).body().contains("\"drained\" : true"));
        assertEquals(200, ctl.send("POST", "/control/v1/endpoints/" + key + "/undrain", "").status());
        r = ctl.send("POST", "/control/v1/endpoints/" + key + "/weight", "{\"weight\":5}");
        assertEquals(200, r.status(), r.body());
        assertEquals(2, JSON.readTree(r.body()).get("version").asLong());
        assertEquals(5, gw.config().rules().get(0).endpoints().get(0).weight());
        assertEquals(5, gw.registry().get(key).config().weight(), "the live endpoint state follows the new version");
        assertEquals(404, ctl.send("POST", "/control/v1/endpoints/127.0.0.1:1/drain", "").status());
        assertEquals(400, ctl.send("POST", "/control/v1/endpoints/" + key + "/weight", "{\"weight\":0}").status());
    }

    @Test
    void patchAppliesTunablesAsANewVersionAndNamesRefusedKeys() throws Exception {
        ControlClient.Response r = ctl.send("PATCH", "/control/v1/rules/chat", "{\"kv.load_cap_factor\":1.2,\"explain\":true}");
        assertEquals(200, r.status(), r.body());
        assertEquals(2, JSON.readTree(r.body()).get("version").asLong());
        assertEquals(1.2, gw.config().rules().get(0).kvExact().loadCapFactor());
        assertTrue(gw.routeTable().ruleByName("chat").config().explain(), "the routing stage runs the patched rule");
        r = ctl.send("PATCH", "/control/v1/rules/chat", "{\"kv\":{\"load_cap_facter\":2},\"kv_capacity_blocks\":4096}");
        assertEquals(400, r.status(), r.body());
        assertTrue(r.body().contains("kv.load_cap_facter: is not a rule key"), r.body());
        assertTrue(r.body().contains("kv_capacity_blocks: is restart-only"), r.body());
        r = ctl.send("PATCH", "/control/v1/rules/chat", "{\"kv.load_cap_factor\":0.5}");
        assertEquals(400, r.status(), r.body());
        assertTrue(r.body().contains("kv.load_cap_factor: value 0.5 must be in [1.0, 100.0]"), r.body());
        assertEquals(2, gw.applied().version(), "refused patches change nothing");
    }

    @Test
    void checkDiffAndLogLevel() throws Exception {
        String cur = ctl.send("GET", "/admin/v1/config", null).body();
        // kv's load_cap_factor (session's, written before it, has the same default).
        int kvAt = cur.indexOf("load_cap_factor: 1.5", cur.indexOf("\n  kv:"));
        String edited = cur.substring(0, kvAt) + "load_cap_factor: 2.5" + cur.substring(kvAt + "load_cap_factor: 1.5".length());
        ControlClient.Response r = ctl.send("POST", "/control/v1/config/diff", edited);
        assertEquals(200, r.status(), r.body());
        assertEquals("[\"rules[name=chat].kv.load_cap_factor: 1.5 -> 2.5\"]", JSON.readTree(r.body()).get("changes").toString());
        r = ctl.send("POST", "/control/v1/config/check", edited.replace("hash_seed: '0'", "hash_seed: abc"));
        assertEquals(400, r.status(), r.body());
        assertTrue(r.body().contains("hash_seed: value 'abc'"), r.body());
        assertEquals(200, ctl.send("POST", "/control/v1/config/check", edited).status());
        assertEquals(1, gw.applied().version(), "check and diff never apply");
        assertEquals(200, ctl.send("PUT", "/control/v1/log-level", "{\"level\":\"debug\"}").status());
        assertEquals(400, ctl.send("PUT", "/control/v1/log-level", "{\"level\":\"chatty\"}").status());
        assertEquals(200, ctl.send("PUT", "/control/v1/log-level", "info").status());
    }

    @Test
    void aPeerWithAnotherUidIsRefusedAndLogged() throws Exception {
        List<Integer> allowed = new CopyOnWriteArrayList<>();
        int[] peer = {4242};
        Path sock = dir.resolve("injected.sock");
        try (ControlSocket s = ControlSocket.bind(sock, gw.admin(), () -> allowed, () -> gw.config().adminLimits(),
                ch -> peer[0], 1000)) {
            ControlClient c = ControlClient.socket(s.path());
            ControlClient.Response r = c.send("GET", "/control/v1/status", null);
            assertEquals(403, r.status(), r.body());
            assertTrue(r.body().contains("peer uid 4242 is not the gateway's (1000)"), r.body());
            allowed.add(4242); // control_allowed_uids, read per connection
            assertEquals(200, c.send("GET", "/control/v1/status", null).status());
            peer[0] = 1000;
            allowed.clear();
            assertEquals(200, c.send("GET", "/control/v1/status", null).status(), "the gateway's own uid");
        }
        assertFalse(Files.exists(sock), "the socket file is removed on close");
    }

    /** A real process of another uid (nobody): refused by the file mode, and by the uid check when the mode lets it in. */
    @Test
    void aRealProcessOfAnotherUidIsRefused() throws Exception {
        assumeTrue(ControlSocket.ownUid() == 0 && Files.isExecutable(Path.of("/usr/bin/setpriv")) && Files.isExecutable(Path.of("/usr/bin/curl")),
            "needs root, setpriv and curl");
        Path sock = gw.controlSocketPath();
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Result denied = asNobody(sock);
        assertEquals(7, denied.exit, "mode 0600: nobody cannot even connect: " + denied.out);
        Files.setPosixFilePermissions(sock, PosixFilePermissions.fromString("rw-rw-rw-"));
        Result refused = asNobody(sock);
        assertEquals(0, refused.exit, refused.out);
        assertTrue(refused.out.startsWith("403 "), refused.out);
        assertTrue(refused.out.contains("peer uid 65534 is not the gateway's (0)"), refused.out);
    }

    private record Result(int exit, String out) {}

    private static Result asNobody(Path sock) throws Exception {
        Process p = new ProcessBuilder("/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            "/usr/bin/curl", "-s", "-w", "\n%{http_code}", "--max-time", "5", "--unix-socket", sock.toString(),
            "http://kvgate/control/v1/status").redirectErrorStream(true).start();
        assertTrue(p.waitFor(20, TimeUnit.SECONDS));
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        // curl prints the body, a newline, then the status code: put the code first for the assertions.
        int nl = out.lastIndexOf('\n');
        return new Result(p.exitValue(), out.substring(nl + 1).trim() + " " + out.substring(0, Math.max(0, nl)));
    }
}
