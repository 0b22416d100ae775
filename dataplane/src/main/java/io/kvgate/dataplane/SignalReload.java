package io.kvgate.dataplane;

import io.kvgate.control.config.ConfigException;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.config.ReloadOutcome;
import io.kvgate.dataplane.config.RestartRequiredException;

/**
 * SIGHUP reloads the {@code --config} file, on a fresh thread (never on the signal thread): what {@code ctl reload}
 * does, with the outcome in the operator log. Threading: installed once by {@code serve}'s main thread.
 */
final class SignalReload {
    private SignalReload() {}

    /** Installs the handler for {@code gw}; before the line that says it serves, so a SIGHUP after it never kills. */
    static void install(Gateway gw) {
        Runnable reload = () -> {
            try {
                ReloadOutcome o = gw.reloadConfigFile();
                if (!o.applied()) {
                    Log.info("SIGHUP: " + gw.configFile() + " unchanged (version " + o.version() + ")");
                }
            } catch (ConfigException e) {
                Log.error("SIGHUP: " + gw.configFile() + " not applied, nothing changed: " + e.getMessage());
            } catch (RestartRequiredException e) {
                Log.error("SIGHUP: " + e.getMessage());
            } catch (RuntimeException e) {
                Log.error("SIGHUP: reload failed: " + e);
            }
        };
        Object previous = Signals.handle("HUP", () -> {
            Thread t = new Thread(reload, "kvgate-sighup-reload");
            t.setDaemon(true);
            t.start();
        });
        if (previous == Signals.IGNORED) {
            // The JVM leaves a signal the process was started ignoring (nohup, some supervisors) ignored and says
            // so only by this return value: without this line SIGHUP would do nothing, silently.
            Log.warn("SIGHUP is ignored by this process (started under nohup?): it will not reload the"
                + " configuration; use ./kvgate ctl reload or POST /admin/v1/reload");
        }
    }
}
