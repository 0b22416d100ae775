# Shared by the source-tree launcher (./kvgate) and the release launcher (bin/kvgate in `kvgate dist`): sourced, it
# defines how a Java runtime is found and which JVM options each command runs with. One copy, so the two launchers
# never disagree on either.

kvgate_java_major() { "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p' | head -n1; }

# Prints the home of the first Java >= 25 among $KVGATE_JAVA_HOME, $JAVA_HOME, the usual /usr/lib/jvm places and the
# java on PATH. With "jdk" as $1 the candidate must also have javac (the source tree builds itself); a release runs on a
# JRE or a jlink image.
kvgate_find_java() {
  local need="${1:-jre}" c v
  for c in "${KVGATE_JAVA_HOME:-}" "${JAVA_HOME:-}" /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/*25* /usr/lib/jvm/* \
           "$(dirname "$(dirname "$(readlink -f "$(command -v java 2>/dev/null || echo /nonexistent)")")")"; do
    [ -n "$c" ] && [ -x "$c/bin/java" ] || continue
    [ "$need" != jdk ] || [ -x "$c/bin/javac" ] || continue
    v="$(kvgate_java_major "$c/bin/java")"
    if [ -n "$v" ] && [ "${v%%.*}" -ge 25 ] 2>/dev/null; then echo "$c"; return 0; fi
  done
  return 1
}

# The commands that run the request path for real (the gateway, the in-process demo, the simulator and the load
# generator) get every line of jvm.options, --add-modules=jdk.incubator.vector included: the request lexer scans
# bodies with the Vector API (dataplane JsonLexer/VectorScan). Short CLI commands (ctl, hash, render, version, help,
# completion) lex no request body and would only print the JVM's "Using incubator modules" warning first, so they
# run without that one module; everything else (Unsafe access, opens) stays, or Netty and Chronicle warn instead.
# $@: the command line. Asking for help or the version lexes nothing either, so serve --help is quiet too.
kvgate_command_needs_vector() {
  local a cmd=""
  for a in "$@"; do
    case "$a" in -h | --help | -V | --version) return 1 ;; -*) ;; *) [ -n "$cmd" ] || cmd="$a" ;; esac
  done
  case "$cmd" in serve | demo | sim | bench) return 0 ;; *) return 1 ;; esac
}

# Fills the array KVGATE_JVM_ARGS with jvm.options ($1) as the command line ($2...) needs it (comments and blank
# lines out).
kvgate_jvm_args() {
  local file="$1" line vector=no
  shift
  if kvgate_command_needs_vector "$@"; then vector=yes; fi
  KVGATE_JVM_ARGS=()
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in '' | '#'*) continue ;; esac
    if [ "$line" = "--add-modules=jdk.incubator.vector" ] && [ "$vector" = no ]; then continue; fi
    KVGATE_JVM_ARGS+=("$line")
  done < "$file"
}
