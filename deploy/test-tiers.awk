# Sums the wall-clock time Maven spent in each test tier from a `./kvgate test` log whose lines start with a
# timestamp (HH:mm:ss.SSS, the launcher sets it). A tier's time is the span from its plugin execution's banner
# ("--- surefire:...:test (default-test) @ module ---" for the unit tier, "--- failsafe:...:integration-test" for the
# system tier) to the next banner, summed over modules; everything else is the build. The quality tier runs inside
# the system tier's failsafe execution (pom.xml failsafe.groups), so its time is read from its class's own summary
# line ("Tests run: ... Time elapsed: N s -- in io.kvgate.tools.quality.X") and shown as a part of the system tier. Run as
#   awk -f deploy/test-tiers.awk target/test-run.log
function seconds(ts,   p) { split(ts, p, ":"); return p[1] * 3600 + p[2] * 60 + p[3] }
function close_segment(now) {
    if (open_tier != "") { d = now - started; if (d < 0) d += 86400; spent[open_tier] += d }
}
$1 ~ /^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]+$/ {
    now = seconds($1)
    if (first == "") first = now
    last = now
    if ($0 ~ / --- [a-z-]+:[^ ]+ \(.*\) @ /) {
        close_segment(now)
        started = now
        if ($0 ~ / --- surefire:[^ ]*:test /) open_tier = "unit"
        else if ($0 ~ / --- failsafe:[^ ]*:integration-test /) open_tier = "system"
        else open_tier = "build"
    }
    if ($0 ~ /Time elapsed: [0-9.,]+ s.* in io\.kvgate\.tools\.quality\./) {
        match($0, /Time elapsed: [0-9.,]+/); e = substr($0, RSTART + 14, RLENGTH - 14); gsub(",", "", e); quality += e
        match($0, /Tests run: [0-9]+/); quality_tests += substr($0, RSTART + 11, RLENGTH - 11)
    }
    if ($0 ~ /Tests run: [0-9]+, Failures: [0-9]+, Errors: [0-9]+, Skipped: [0-9]+$/ && open_tier != "") {
        # The summary line a plugin prints at its end (no class name after it): the tier's test count.
        match($0, /Tests run: [0-9]+/); tests[open_tier] += substr($0, RSTART + 11, RLENGTH - 11)
    }
}
END {
    close_segment(last)
    total = last - first; if (total < 0) total += 86400
    printf "kvgate test: unit tier %d s (%d tests), system tier %d s (%d tests; the quality tier %d s of it, %d tests), " \
        "build %d s, total %d s\n", spent["unit"], tests["unit"], spent["system"], tests["system"], quality, quality_tests, \
        spent["build"], total
}
