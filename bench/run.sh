#!/bin/sh
# Run every benchmark and print one table. A benchmark is a binary build/bench/bench_*
# or a script bench/*.sh (not this one); each prints, besides its own log, result lines
#   RESULT<TAB>name<TAB>measured<TAB>unit<TAB>target<TAB>PASS|FAIL|INFO
# A benchmark that checks its answer and finds it wrong prints FAIL (and exits non-zero).
# Logs: $BUILD/bench-logs/. Exit status: non-zero if any FAIL.
BUILD=${BUILD:-build}
export BUILD
logdir="$BUILD/bench-logs"
mkdir -p "$logdir"
results="$logdir/results.tsv"
: >"$results"
rc=0
for b in "$BUILD"/bench/bench_* bench/*.sh; do
	[ -f "$b" ] || continue
	[ "$b" = bench/run.sh ] && continue
	name=$(basename "$b" .sh)
	echo "bench: $name" >&2
	case "$b" in
	*.sh) sh "$b" >"$logdir/$name.log" 2>&1 ;;
	*) "$b" >"$logdir/$name.log" 2>&1 ;;
	esac
	[ $? = 0 ] || { rc=1; echo "bench: $name exited non-zero (log $logdir/$name.log)" >&2; }
	grep '^RESULT	' "$logdir/$name.log" | cut -f2- >>"$results"
done
echo
printf '| %-46s | %14s | %-8s | %-14s | %-6s |\n' benchmark measured unit target result
printf '|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' $(seq 48))" "$(printf -- '-%.0s' $(seq 16))" \
	"$(printf -- '-%.0s' $(seq 10))" "$(printf -- '-%.0s' $(seq 16))" "$(printf -- '-%.0s' $(seq 8))"
while IFS='	' read -r n m u t r; do
	printf '| %-46s | %14s | %-8s | %-14s | %-6s |\n' "$n" "$m" "$u" "$t" "$r"
	[ "$r" = FAIL ] && rc=1
done <"$results"
echo "machine: $(uname -m), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
exit $rc
