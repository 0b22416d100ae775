#!/usr/bin/env bash
# ./kvgate dist [--no-build] [--out DIR]: the release tarball DIR/kvgate-<version>.tar.gz (DIR defaults to target/).
#   bin/kvgate   the release launcher (deploy/dist/kvgate-release): Java >= 25 only, no Maven, no sources
#   lib/         every runtime jar, jvm.options, and the launcher's sourced helpers
#   config/      deploy/examples (their tokenizer paths, ../models/..., resolve inside the tarball)
#   models/      deploy/models (the tokenizers the examples name; licences in NOTICE)
#   systemd/     deploy/systemd, as in the tree
#   completion/  kvgate.bash (kvgate completion bash)
#   LICENSE, NOTICE
# --no-build packs the jars already built (tools/target); without it Maven builds them first.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
. "$ROOT/deploy/kvgate-java.sh"

build=yes out="$ROOT/target"
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=no ;;
    --out) [ $# -ge 2 ] || { echo "kvgate dist: --out needs a directory" >&2; exit 2; }; out="$2"; shift ;;
    -h | --help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "kvgate dist: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

JDK="$(kvgate_find_java jdk)" || { echo "kvgate dist: needs a JDK >= 25 (set JAVA_HOME)" >&2; exit 1; }
export JAVA_HOME="$JDK"
if [ "$build" = yes ]; then
  echo "kvgate dist: building (mvnw package -pl tools -am, tests skipped) ..." >&2
  (cd "$ROOT" && ./mvnw -B -ntp -DskipTests package -pl tools -am) | grep --line-buffered -E '^\[INFO\] Building |BUILD|ERROR' >&2
fi
jar="$ROOT/tools/target/kvgate-tools.jar"
[ -f "$jar" ] && [ -d "$ROOT/tools/target/lib" ] || { echo "kvgate dist: $jar or tools/target/lib missing: build first (drop --no-build)" >&2; exit 1; }

java_cp="$jar:$ROOT/tools/target/lib/*"
version="$("$JDK/bin/java" -cp "$java_cp" io.kvgate.tools.Main --version | sed -n 's/^kvgate \([^ ]*\) .*/\1/p')"
[ -n "$version" ] || { echo "kvgate dist: could not read the version from the built jars" >&2; exit 1; }

name="kvgate-$version"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stage="$(mktemp -d "$out/.dist.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
d="$stage/$name"
mkdir -p "$d"/{bin,lib,config,models,systemd,completion}
install -m 0755 "$ROOT/deploy/dist/kvgate-release" "$d/bin/kvgate"
cp "$jar" "$ROOT"/tools/target/lib/*.jar "$d/lib/"
cp "$ROOT/deploy/jvm.options" "$ROOT/deploy/jvm-host.sh" "$ROOT/deploy/kvgate-java.sh" "$d/lib/"
cp "$ROOT"/deploy/examples/*.yaml "$d/config/"
cp -r "$ROOT"/deploy/models/. "$d/models/"
cp "$ROOT"/deploy/systemd/* "$d/systemd/"
cp "$ROOT/LICENSE" "$ROOT/NOTICE" "$d/"
"$JDK/bin/java" -cp "$java_cp" io.kvgate.tools.Main completion bash > "$d/completion/kvgate.bash"
# Owner root and sorted names: the same inputs give the same listing on every machine.
tar --owner=0 --group=0 --numeric-owner --sort=name -czf "$out/$name.tar.gz" -C "$stage" "$name"
echo "$out/$name.tar.gz"
