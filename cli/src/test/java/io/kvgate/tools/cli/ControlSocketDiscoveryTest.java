package io.kvgate.tools.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Where ctl looks when neither --socket nor --admin is given: each environment case (serve's side: ControlSocketLocationTest). */
class ControlSocketDiscoveryTest {

    @Test
    void kvgateSocketWins() {
        assertEquals("/srv/gw.sock", ControlCommand.defaultSocket(Map.of("KVGATE_SOCKET", "/srv/gw.sock",
            "RUNTIME_DIRECTORY", "/run/kvgate"), 1000, p -> true));
    }

    @Test
    void systemdRuntimeDirectory() {
        assertEquals("/run/kvgate-x/kvgate.sock", ControlCommand.defaultSocket(Map.of("RUNTIME_DIRECTORY", "/run/kvgate-x"), 0,
            Path.of("/run/kvgate-x/kvgate.sock")::equals));
    }

    @Test
    void rootServiceUnderRunKvgate() {
        assertEquals("/run/kvgate/kvgate.sock", ControlCommand.defaultSocket(Map.of("XDG_RUNTIME_DIR", "/run/user/1000"), 1000,
            Path.of("/run/kvgate/kvgate.sock")::equals));
    }

    @Test
    void nonRootGatewayInALoginSession() {
        assertEquals("/run/user/1000/kvgate/kvgate.sock", ControlCommand.defaultSocket(Map.of("XDG_RUNTIME_DIR", "/run/user/1000"),
            1000, Path.of("/run/user/1000/kvgate/kvgate.sock")::equals));
    }

    @Test
    void nonRootGatewayWithoutASession() {
        assertEquals("/tmp/kvgate-1000/kvgate.sock", ControlCommand.defaultSocket(Map.of(), 1000,
            Path.of("/tmp/kvgate-1000/kvgate.sock")::equals));
    }

    @Test
    void noSocketAnywhereNamesTheFirstPlaceInTheError() {
        // ctl then reports "cannot reach ... /run/kvgate/kvgate.sock": where a service's socket would be.
        assertEquals("/run/kvgate/kvgate.sock", ControlCommand.defaultSocket(Map.of(), 1000, p -> false));
    }
}
