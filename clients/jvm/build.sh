#!/usr/bin/env bash
# Compiles the JVM signer with javac alone (no Gradle or Maven: Debian's packages are the only
# registry this project's machines reach, and these few source trees need nothing more).
#
#   src/main/java         the core signer (JDK only; compiled first, without any other jar, so
#                         that it cannot come to depend on one)
#   src/okhttp/java       the OkHttp interceptor            (needs libokhttp-java)
#   src/jdkhttp/java      the java.net.http helper
#   src/testsupport/java  a strict JSON reader for the tests and the live check
#   src/test/java         JUnit 5 tests                     (needs junit5)
#   src/live/java         LiveCheck, run against a real gateway by the Swift test suite
#   examples/             StockQuote.java (compiled only as a check; it runs as a source file)
#
# Output goes to $JVM_BUILD_DIR (default: .build/jvm at the repository root, which git ignores):
#   classes/<tree>/   one directory per source tree
#   classpath         the run-time class path (core, adapters, live check, OkHttp, Okio)
#   test-classpath    the class path the tests run with
# The last line printed is the path of the classpath file.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${JVM_BUILD_DIR:-$here/../../.build/jvm}"
jar_dir="${JVM_JAR_DIR:-/usr/share/java}"

fail() {
    echo "clients/jvm/build.sh: $*" >&2
    exit 1
}

command -v javac >/dev/null 2>&1 || fail "javac not found; install a JDK 17: apt-get install openjdk-17-jdk-headless"
javac_version="$(javac -version 2>&1 | awk '{print $2}')"
javac_major="${javac_version%%.*}"
[[ "$javac_major" =~ ^[0-9]+$ && "$javac_major" -ge 17 ]] ||
    fail "javac $javac_version is too old; Java 17 is needed: apt-get install openjdk-17-jdk-headless"

okhttp="$jar_dir/okhttp.jar"
okio="$jar_dir/okio.jar"
junit="$jar_dir/junit-platform-console-standalone.jar"
[[ -f "$okhttp" && -f "$okio" ]] || fail "$okhttp or $okio is missing: apt-get install libokhttp-java"
[[ -f "$junit" ]] || fail "$junit is missing: apt-get install junit5"

# Checked before anything is created: build output never lands in the source tree.
build="$(realpath -m "$build")"
case "$build/" in
"$(realpath "$here")/"*) fail "refusing to build into the source tree ($build); set JVM_BUILD_DIR outside clients/jvm" ;;
esac
mkdir -p "$build"
# Each build starts from scratch; two at once (a test run and the Swift suite's live check) would
# delete each other's classes, so they take turns.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$build/.lock"
    flock 9
fi
classes="$build/classes"

# Nothing changed since the last build (the stamp is newer than every source and this script):
# the test suite calls this before each live check, after `make test` has already built.
stamp="$build/.built"
if [[ -f "$stamp" && -f "$build/classpath" && -f "$build/test-classpath" &&
    -z "$(find "$here/src" "$here/examples" "$here/build.sh" -newer "$stamp" -print -quit)" ]]; then
    echo "up to date in $classes"
    echo "$build/classpath"
    exit 0
fi
rm -f "$stamp"

# compile TREE CLASSPATH [JAVAC OPTIONS]: compiles src/TREE/java into classes/TREE, from scratch
# (a few seconds; nothing stale can survive a rename).
compile() {
    local tree="$1" classpath="$2"
    shift 2
    local out="$classes/$tree" list="$build/sources-$tree.txt"
    rm -rf "$out"
    mkdir -p "$out"
    find "$here/src/$tree/java" -name '*.java' | sort >"$list"
    [[ -s "$list" ]] || fail "no sources in src/$tree/java"
    javac --release 17 -encoding UTF-8 -Xlint:all,-processing -Werror -g \
        "$@" -d "$out" ${classpath:+-cp "$classpath"} @"$list" ||
        fail "compiling src/$tree/java failed"
}

# The core must run on Android API 26: java.base alone (--limit-modules: no java.net.http), and
# none of the Java 9+ conveniences Android added only later. javac cannot check API levels without
# Android's jar, so the common ones are searched for (outside comments).
android_level="$(grep -rnE '\b(List|Set|Map)\.(of|copyOf)\(|Map\.entry\(|\.(isBlank|strip|stripLeading|stripTrailing|repeat|lines)\(|\.readAllBytes\(\)|\.transferTo\(|\brecord +[A-Z]' \
    "$here/src/main/java" | grep -vE '^[^:]*:[0-9]+: *(\*|//)' || true)"
[[ -z "$android_level" ]] || fail "the core uses an API Android 26 lacks (see README, Android):
$android_level"
compile main "" --limit-modules java.base
compile okhttp "$classes/main:$okhttp:$okio"
compile jdkhttp "$classes/main"
compile testsupport ""
compile live "$classes/main:$classes/okhttp:$classes/jdkhttp:$classes/testsupport:$okhttp:$okio"
runtime="$classes/main:$classes/okhttp:$classes/jdkhttp:$classes/testsupport:$classes/live:$okhttp:$okio"
compile test "$runtime:$junit"

# The example runs in single-file source mode; compiling it here keeps it from going stale.
rm -rf "$classes/examples"
javac --release 17 -encoding UTF-8 -Xlint:all,-processing -Werror -d "$classes/examples" -cp "$runtime" \
    "$here/examples/StockQuote.java" || fail "compiling examples/StockQuote.java failed"

printf '%s\n' "$runtime" >"$build/classpath"
printf '%s\n' "$runtime:$classes/test" >"$build/test-classpath"
touch "$stamp"
echo "compiled into $classes (javac $javac_version)"
echo "$build/classpath"
