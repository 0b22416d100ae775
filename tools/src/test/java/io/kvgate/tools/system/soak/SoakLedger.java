package io.kvgate.tools.system.soak;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the soak's clients saw, and which failures the issue allows: only requests that were in flight on an engine
 * at the moment it was killed. A failure is attributed to a kill when the request started before the engine was gone
 * and ended after the kill began, and it went to that engine; a failure whose engine is unknown (no response head
 * arrived, so no {@code X-Kvgate-Route}) is attributed when it overlaps a kill in time, and counted apart so the
 * report shows how many were attributed by time alone. Everything else is a failure beyond those allowed.
 */
final class SoakLedger {
    /** One finished request; {@code endpoint} is {@code host:port} from {@code X-Kvgate-Route}, or null. */
    record Outcome(long startNs, long endNs, String endpoint, boolean ok, String detail) {}

    /** An engine SIGKILLed: from the signal to the moment the process was gone. */
    record Kill(String endpoint, long startNs, long goneNs) {}

    /** The failures split by cause. */
    record Attribution(List<Outcome> onKilledEngine, List<Outcome> inKillWindowEngineUnknown, List<Outcome> unexplained) {}

    private final AtomicLong ok = new AtomicLong();
    private final List<Outcome> failures = new ArrayList<>();
    private final List<Kill> kills = new ArrayList<>();

    void record(Outcome o) {
        if (o.ok()) {
            ok.incrementAndGet();
            return;
        }
        synchronized (failures) {
            failures.add(o);
        }
    }

    void killed(Kill k) {
        synchronized (kills) {
            kills.add(k);
        }
    }

    long ok() {
        return ok.get();
    }

    List<Outcome> failures() {
        synchronized (failures) {
            return List.copyOf(failures);
        }
    }

    List<Kill> kills() {
        synchronized (kills) {
            return List.copyOf(kills);
        }
    }

    Attribution attribute() {
        List<Outcome> onKilled = new ArrayList<>();
        List<Outcome> byTime = new ArrayList<>();
        List<Outcome> unexplained = new ArrayList<>();
        List<Kill> ks = kills();
        for (Outcome f : failures()) {
            boolean sameEngine = false;
            boolean overlaps = false;
            for (Kill k : ks) {
                if (f.startNs() <= k.goneNs() && f.endNs() >= k.startNs()) {
                    overlaps = true;
                    sameEngine |= k.endpoint().equals(f.endpoint());
                }
            }
            if (sameEngine) {
                onKilled.add(f);
            } else if (overlaps && f.endpoint() == null) {
                byTime.add(f);
            } else {
                unexplained.add(f);
            }
        }
        return new Attribution(onKilled, byTime, unexplained);
    }
}
