# Sourced by the perf scripts that run perf's own classes (jmh.sh, request-path.sh): picks a JDK 25+ for JAVA_HOME
# (the java on PATH may be older) and, unless KVGATE_JMH_NO_BUILD is set, builds perf and what it needs first.
# Needs ROOT (the checkout) set by the caller.
JDK="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
if [ ! -x "$JDK/bin/java" ] || ! "$JDK/bin/java" -version 2>&1 | grep -qE 'version "(2[5-9]|[3-9][0-9])'; then
  JDK=/usr/lib/jvm/temurin-25-jdk-amd64
fi
export JAVA_HOME="$JDK"
if [ -z "${KVGATE_JMH_NO_BUILD:-}" ]; then
  (cd "$ROOT" && ./mvnw -q -B -DskipTests package -pl perf -am) >&2
fi
