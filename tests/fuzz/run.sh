#!/bin/sh
# Build and run every fuzz target tests/fuzz/fuzz_*.c (libFuzzer, clang) under
# AddressSanitizer and UBSan, FUZZ_TIME seconds each (default 60). Each target declares
# in its own comment lines what it needs:
#   // fuzz-sources: GLOB...   sources to compile with it (relative to the repo root);
#                               @embed = the embedded files (scripts/embed.sh, as the
#                               Makefile generates them)
#   // fuzz-libs: -lfoo ...    libraries to link
#   // fuzz-seeds: GLOB...     seed inputs copied into its corpus
#   // fuzz-dict: FILE         a libFuzzer dictionary
# Objects, binaries, corpora and crash artifacts go to "${BUILD:-build}-fuzz". Exit
# status: 0 when every target ran clean, 1 on a crash, leak or build failure, 77 when
# clang has no libFuzzer. Env: BUILD, FUZZ_TIME, FUZZ_CC (default clang), FUZZ (a
# pattern selecting targets by name).
set -u
BUILD=${BUILD:-build}
OUT="$BUILD-fuzz"
FUZZ_TIME=${FUZZ_TIME:-60}
FUZZ_CC=${FUZZ_CC:-clang}
sel=${FUZZ:-}
if ! command -v "$FUZZ_CC" >/dev/null 2>&1; then
	echo "fuzz: '$FUZZ_CC' not found; fuzzing needs clang with libFuzzer"
	exit 77
fi
mkdir -p "$OUT/gen" "$OUT/corpus" || exit 1
probe="$OUT/gen/probe.c"
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if ! "$FUZZ_CC" -fsanitize=fuzzer -o "$OUT/gen/probe" "$probe" >/dev/null 2>&1; then
	echo "fuzz: '$FUZZ_CC' cannot link -fsanitize=fuzzer (libFuzzer missing)"
	exit 77
fi
sh scripts/schema-version.sh results/schema.sql >"$OUT/gen/schema_version.h.tmp" || exit 1
if cmp -s "$OUT/gen/schema_version.h.tmp" "$OUT/gen/schema_version.h"; then
	rm -f "$OUT/gen/schema_version.h.tmp"
else
	mv "$OUT/gen/schema_version.h.tmp" "$OUT/gen/schema_version.h" || exit 1
fi
embed_files=$(ls results/*.sql sweeps/specs/*.json report/*.gp common/machines/*.json 2>/dev/null)
# shellcheck disable=SC2086
sh scripts/embed.sh $embed_files >"$OUT/gen/embed.c.tmp" || exit 1
# keep the old file (and its time stamp) when nothing changed, so targets are not rebuilt
if cmp -s "$OUT/gen/embed.c.tmp" "$OUT/gen/embed.c"; then
	rm -f "$OUT/gen/embed.c.tmp"
else
	mv "$OUT/gen/embed.c.tmp" "$OUT/gen/embed.c" || exit 1
fi
fail=0 ran=0
for f in tests/fuzz/fuzz_*.c; do
	[ -f "$f" ] || continue
	name=$(basename "$f" .c)
	case "$name" in *"$sel"*) ;; *) continue ;; esac
	srcs="" libs="" seeds=""
	for pat in $(sed -n 's|^// fuzz-sources:||p' "$f"); do
		if [ "$pat" = @embed ]; then
			srcs="$srcs $OUT/gen/embed.c"
			continue
		fi
		for g in $pat; do
			[ -f "$g" ] && srcs="$srcs $g"
		done
	done
	libs=$(sed -n 's|^// fuzz-libs:||p' "$f")
	# rebuild when the target, a source, or a header next to a source is newer
	stale=1
	if [ -x "$OUT/$name" ]; then
		dirs=$(for s in $srcs "$f"; do dirname "$s"; done | sort -u)
		# shellcheck disable=SC2086
		[ -z "$(find $dirs tests/fuzz/run.sh -maxdepth 1 \( -name '*.c' -o -name '*.h' -o -name run.sh \) \
			-newer "$OUT/$name" 2>/dev/null | head -n 1)" ] && stale=0
	fi
	# shellcheck disable=SC2086
	if [ $stale = 1 ] && ! "$FUZZ_CC" -std=c11 -g -O1 -D_GNU_SOURCE -I. -I"$OUT/gen" -DLB_GIT_COMMIT='"fuzz"' \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-fno-omit-frame-pointer -o "$OUT/$name" "$f" $srcs $libs; then
		echo "fuzz: FAIL: cannot build $name"
		fail=1
		continue
	fi
	corpus="$OUT/corpus/$name"
	mkdir -p "$corpus"
	for pat in $(sed -n 's|^// fuzz-seeds:||p' "$f"); do
		for g in $pat; do
			[ -f "$g" ] && cp "$g" "$corpus/seed-$(basename "$g")"
		done
	done
	dict=$(sed -n 's|^// fuzz-dict:[[:space:]]*||p' "$f" | head -n 1)
	dictarg=""
	[ -n "$dict" ] && [ -f "$dict" ] && dictarg="-dict=$dict"
	echo "fuzz: $name for ${FUZZ_TIME}s"
	# shellcheck disable=SC2086
	if ! "$OUT/$name" $dictarg -max_total_time="$FUZZ_TIME" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$OUT/crash-$name-" "$corpus" \
		>"$OUT/$name.log" 2>&1; then
		echo "fuzz: FAIL: $name found a crash, leak or timeout (log $OUT/$name.log; inputs $OUT/crash-$name-*)"
		tail -n 40 "$OUT/$name.log"
		fail=1
		continue
	fi
	ran=$((ran + 1))
	grep -E '^stat::number_of_executed_units' "$OUT/$name.log" | sed "s/^/fuzz: $name: /"
done
echo "fuzz: $ran targets ran clean"
exit $fail
