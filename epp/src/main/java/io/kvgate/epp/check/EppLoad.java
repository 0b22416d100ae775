package io.kvgate.epp.check;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code epp-check --load}: the Envoy emulator as an open-loop load generator against a picker, for its cost in EPP
 * mode. Requests start on a fixed schedule ({@code rate} per second for {@code seconds}, never more than
 * {@code maxInFlight} at once: a request that cannot start is counted as missed, not delayed), each with a distinct
 * prompt of {@code promptBytes} (no two share a prefix: every request is tokenized and looked up in full), spread over
 * {@code connections} HTTP/2 connections as Envoy's worker threads would. The engine's answer is scripted (a short
 * stream with usage), so what is timed is the picker alone: from the first request message to the last piece of the
 * body's echo (the decision and the echo of every byte, what Envoy waits for before it can send the request on), and
 * the response's round trips through the picker.
 */
public final class EppLoad {
    /** Exchanges run one at a time before the schedule, unmeasured (the load generator's own warm-up). */
    static final int WARMUP_REQUESTS = 20;

    private EppLoad() {}

    /** What a run measured (latencies in microseconds). */
    public record Report(long started, long ok, long failed, long missed, double seconds, long[] requestPhaseUs,
                         long[] responsePhaseUs, List<String> firstFailures) {
        public double achievedPerSecond() {
            return ok / seconds;
        }

        static long pct(long[] sorted, double p) {
            return sorted.length == 0 ? -1 : sorted[Math.min(sorted.length - 1, (int) Math.ceil(p / 100.0 * sorted.length) - 1)];
        }

        /** One JSON object (the perf script reads it). */
        public String json() {
            return String.format(Locale.ROOT, "{\"started\":%d,\"ok\":%d,\"failed\":%d,\"missed\":%d,\"seconds\":%.3f,"
                    + "\"achieved_per_s\":%.1f,\"request_phase_us\":{\"p50\":%d,\"p90\":%d,\"p99\":%d,\"max\":%d},"
                    + "\"response_phase_us\":{\"p50\":%d,\"p99\":%d,\"max\":%d}}",
                started, ok, failed, missed, seconds, achievedPerSecond(), pct(requestPhaseUs, 50), pct(requestPhaseUs, 90),
                pct(requestPhaseUs, 99), pct(requestPhaseUs, 100), pct(responsePhaseUs, 50), pct(responsePhaseUs, 99),
                pct(responsePhaseUs, 100));
        }
    }

    public static Report run(EppCheck.Target t, int promptBytes, double rate, double seconds, int connections, int maxInFlight)
            throws InterruptedException {
        List<EnvoyEmulator> envoys = new ArrayList<>();
        for (int i = 0; i < connections; i++) {
            envoys.add(t.envoy());
        }
        byte[] base = EppCheck.body(t, promptBytes);
        String text = new String(base, StandardCharsets.UTF_8);
        int at = text.indexOf("the quick"); // where the prompt text starts: a distinct head per request goes there
        ConcurrentLinkedQueue<long[]> samples = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
        AtomicLong failed = new AtomicLong();
        Semaphore inFlight = new Semaphore(maxInFlight);
        long total = Math.round(rate * seconds);
        long missed = 0;
        List<Thread> threads = new ArrayList<>();
        // A fresh JVM's first requests load and compile gRPC, protobuf and Netty: run a few one at a time, unmeasured,
        // so the schedule below times the picker rather than this process's start.
        Map<String, String> wh = new LinkedHashMap<>(t.headers());
        wh.put("content-type", "application/json");
        for (int i = 0; i < WARMUP_REQUESTS; i++) {
            try {
                envoys.get(i % connections).exchange(EnvoyEmulator.Request.post(t.path(), wh, base).withPieces(64 * 1024),
                    EppCheck.scripted(false), null);
            } catch (Exception e) {
                failures.add("warm-up: " + e);
            }
        }
        long t0 = System.nanoTime();
        try {
            for (long i = 0; i < total; i++) {
                long due = t0 + (long) (i * 1e9 / rate);
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(wait); // the schedule, not a measurement
                }
                if (!inFlight.tryAcquire()) {
                    missed++;
                    continue;
                }
                String head = String.format(Locale.ROOT, "%012d ", i);
                byte[] body = (text.substring(0, at) + head + text.substring(at + head.length())).getBytes(StandardCharsets.UTF_8);
                Map<String, String> h = new LinkedHashMap<>(t.headers());
                h.put("content-type", "application/json");
                EnvoyEmulator envoy = envoys.get((int) (i % connections));
                threads.add(Thread.ofVirtual().start(() -> {
                    try {
                        EnvoyEmulator.Outcome o = envoy.exchange(EnvoyEmulator.Request.post(t.path(), h, body).withPieces(64 * 1024),
                            EppCheck.scripted(false), null);
                        if (o.immediateStatus != null || !o.violations.isEmpty() || !o.streamCompleted) {
                            failed.incrementAndGet();
                            if (failures.size() < 5) {
                                failures.add(o.immediateStatus != null ? o.immediateStatus + " " + o.immediateBody : o.violations.toString());
                            }
                        } else {
                            samples.add(new long[] {o.requestPhaseNs / 1_000, o.responsePhaseNs / 1_000});
                        }
                    } catch (Exception e) {
                        failed.incrementAndGet();
                        if (failures.size() < 5) {
                            failures.add(e.toString());
                        }
                    } finally {
                        inFlight.release();
                    }
                }));
            }
            for (Thread th : threads) {
                th.join(t.timeoutMs() + 5_000);
            }
        } finally {
            envoys.forEach(EnvoyEmulator::close);
        }
        double elapsed = (System.nanoTime() - t0) / 1e9;
        long[] req = samples.stream().mapToLong(s -> s[0]).sorted().toArray();
        long[] resp = samples.stream().mapToLong(s -> s[1]).sorted().toArray();
        return new Report(total - missed, req.length, failed.get(), missed, elapsed, req, resp, List.copyOf(failures));
    }

    /** {@code epp-check --load ...}: prints the report's JSON (and the first failures on {@code err}). */
    static int main(EppCheck.Target t, String[] args, PrintStream out, PrintStream err) throws InterruptedException {
        double rate = 100;
        double seconds = 10;
        int promptBytes = 100_000;
        int connections = 4;
        int maxInFlight = 4096;
        for (int i = 0; i < args.length; i += 2) {
            String v = i + 1 < args.length ? args[i + 1] : "";
            try {
                switch (args[i]) {
                    case "--rate" -> rate = Double.parseDouble(v);
                    case "--seconds" -> seconds = Double.parseDouble(v);
                    case "--prompt-bytes" -> promptBytes = Integer.parseInt(v);
                    case "--connections" -> connections = Integer.parseInt(v);
                    case "--max-in-flight" -> maxInFlight = Integer.parseInt(v);
                    default -> {
                        err.println("kvgate epp-check --load: unknown option '" + args[i] + "'");
                        return 2;
                    }
                }
            } catch (NumberFormatException e) {
                err.println("kvgate epp-check --load: " + args[i] + " needs a number (got '" + v + "')");
                return 2;
            }
        }
        if (rate <= 0 || seconds <= 0 || promptBytes < 16 || connections < 1 || maxInFlight < 1) {
            err.println("kvgate epp-check --load: --rate, --seconds, --connections and --max-in-flight must be positive,"
                + " --prompt-bytes at least 16");
            return 2;
        }
        Report r = run(t, promptBytes, rate, seconds, connections, maxInFlight);
        out.println(r.json());
        r.firstFailures().forEach(f -> err.println("failed: " + f));
        return r.failed() == 0 && r.missed() == 0 ? 0 : 1;
    }
}
