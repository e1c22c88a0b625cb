#!/usr/bin/env bash
# Builds the JVM signer (build.sh) and runs its JUnit 5 tests with the console launcher from
# Debian's junit5 package. The exit status is the tests' (0: all passed). Extra arguments go to the
# launcher, e.g. `clients/jvm/test.sh --select-class dev.portico.signer.SigningVectorsTest`
# (without any, every test class in the build is run).
#
# The shared vectors are read from Tests/Vectors/signing-vectors.json in this repository (override
# with PORTICO_VECTORS=path).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${JVM_BUILD_DIR:-$repo/.build/jvm}"
export JVM_BUILD_DIR="$build"
launcher="${JVM_JAR_DIR:-/usr/share/java}/junit-platform-console-standalone.jar"
vectors="${PORTICO_VECTORS:-$repo/Tests/Vectors/signing-vectors.json}"

"$here/build.sh"
build="$(cd "$build" && pwd)"
command -v java >/dev/null 2>&1 || { echo "clients/jvm/test.sh: java not found: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
[[ -f "$vectors" ]] || { echo "clients/jvm/test.sh: no signing vectors at $vectors" >&2; exit 1; }

selection=(--scan-class-path "$build/classes/test")
[[ $# -gt 0 ]] && selection=()
colors=()
[[ -t 1 ]] || colors=(--disable-ansi-colors)

log="$build/test-output.txt"
set +e
java -Dportico.vectors="$vectors" -jar "$launcher" \
    --class-path "$(cat "$build/test-classpath")" \
    --disable-banner --fail-if-no-tests "${colors[@]}" \
    "${selection[@]}" "$@" 2>&1 | tee "$log"
status="${PIPESTATUS[0]}"
set -e

# One plain closing line with the counts, from the launcher's summary.
passed="$(sed -n 's/^\[ *\([0-9]*\) tests successful *\]$/\1/p' "$log" | tail -1)"
failed="$(sed -n 's/^\[ *\([0-9]*\) tests failed *\]$/\1/p' "$log" | tail -1)"
echo "jvm: ${passed:-0} passed, ${failed:-0} failed"
exit "$status"
