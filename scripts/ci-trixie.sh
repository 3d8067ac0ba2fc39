#!/bin/sh
# CI's second Slurm: Debian 13 (trixie) with its Slurm 24.11, in a chroot this script makes
# with debootstrap from this machine's own apt mirror (the Debian URI of its release in
# /etc/apt/sources.list*). Inside it, as a new user would on Debian 13: scripts/deps.sh
# (what `make deps` runs: minbase has no make yet), the Slurm packages, a plain `make`,
# scripts/slurm-local.sh start, the tests, slurm-local.sh stop. It prints how long each
# part took.
#
#   sh scripts/ci-trixie.sh          # as root; .ci/run calls it after the native tests
#
# The tests are tests/run.sh's, chosen by name (LB_TRIXIE_TESTS): the unit tests (test_),
# e2e_slurm and e2e_rest (the quickstart through --executor slurm and --executor rest with
# the OpenAPI version negotiated, failures classed, resubmitted), par_slurm (8 tasks under
# srun) and the slurm_ script tests (golden job scripts, hostile input, the build without
# libslurm and libcurl). The rest of `make test` does not touch Slurm and runs natively.
#
# Nothing is cached between runs: the chroot is made fresh and removed at the end. On any
# exit, failure or interruption included, the chroot's daemons are stopped (and whatever
# still runs inside it is ended by PID), every mount it made is unmounted (/proc,
# /dev/shm, /dev/pts: each a new instance, nothing of this machine bound in), and only
# then is the folder removed, never while anything is mounted under it. The chroot shares
# this machine's network: no other Slurm may hold ports 6817, 6818 and 6820 while it runs
# (.ci/run stops the native one first).
# Knobs: LB_TRIXIE_DIR (the folder for the chroot, default a new /var/tmp/lb-trixie.*),
# LB_TRIXIE_SUITE (trixie), LB_TRIXIE_MIRROR (default: from /etc/apt/sources.list*),
# LB_TRIXIE_TESTS (tests/run.sh patterns, space-separated), LB_TRIXIE_KEEP=1 (keep the
# folder, unmounted, to look at afterwards).
set -eu
cd "$(dirname "$0")/.."
SRC=$(pwd)
SUITE=${LB_TRIXIE_SUITE:-trixie}
TESTS_SEL=${LB_TRIXIE_TESTS:-"test_ e2e_slurm e2e_rest par_slurm slurm_"}
KEEP=${LB_TRIXIE_KEEP:-0}

say() { echo "ci-trixie: $*" >&2; }
die() {
	echo "error: ci-trixie: $*" >&2
	exit 1
}
now() { date +%s; }
T0=$(now)
lap_t=$T0
times=""
lap() { # name: the seconds since the last lap, recorded for the summary
	t=$(now)
	times="$times $1=$((t - lap_t))s"
	say "$1 done in $((t - lap_t)) s"
	lap_t=$t
}

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, mount)"

# The Debian mirror this machine installs from: deb822 stanzas (*.sources) or one-line
# entries (*.list) whose suite is this machine's own release (not -security, -updates).
mirror_of_this_machine() {
	# shellcheck disable=SC1091
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v c="$codename" '$1 == "deb" {
			i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
			if ($(i + 1) == c) { print $i; exit } }' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v c="$codename" '
			function flush() { if (deb && uri != "" && suites ~ ("(^| )" c "( |$)")) { print uri; found = 1 } deb = 0; uri = ""; suites = "" }
			/^[[:space:]]*$/ { flush(); if (found) exit; next }
			/^Types:/ { deb = ($0 ~ /(^|[ \t])deb([ \t]|$)/) }
			/^URIs:/ { uri = $2 }
			/^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
			END { if (!found) flush() }' "$f"
	done
}
MIRROR=${LB_TRIXIE_MIRROR:-$(mirror_of_this_machine | head -n 1)}
[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian

DIR=${LB_TRIXIE_DIR:-}
if [ -z "$DIR" ]; then
	DIR=$(mktemp -d /var/tmp/lb-trixie.XXXXXX)
else
	[ ! -e "$DIR" ] || [ -z "$(ls -A "$DIR")" ] || die "$DIR exists and is not empty"
	mkdir -p "$DIR"
fi
DIR=$(cd "$DIR" && pwd -P)
ROOT=$DIR/root
MOUNTS="" # what we mounted, newest first
slurm_started=0

# Run a command inside the chroot with a clean environment.
in_root() {
	chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 CI=true DEBIAN_FRONTEND=noninteractive "$@"
}

mounted_under() { # the mount points at or under $ROOT, as /proc/mounts lists them
	awk -v r="$ROOT" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts
}

cleanup() {
	rc=$?
	set +e
	trap - EXIT INT TERM
	if [ "$slurm_started" = 1 ]; then
		say "stopping the chroot's Slurm"
		in_root sh /src/scripts/slurm-local.sh stop >&2
	fi
	# anything still running inside the chroot was started by this script: end it by PID
	# (a live process would keep /proc busy)
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] || continue
		say "ending leftover process ${p#/proc/} ($(cat "$p/comm" 2>/dev/null))"
		kill -KILL "${p#/proc/}" 2>/dev/null
	done
	for m in $MOUNTS; do
		umount "$m" 2>/dev/null || { sleep 1; umount "$m" || umount -l "$m"; }
	done
	left=$(mounted_under)
	if [ -n "$left" ]; then
		echo "error: ci-trixie: still mounted, $DIR left in place: $left" >&2
		[ "$rc" = 0 ] && rc=1
	elif [ "$KEEP" = 1 ]; then
		say "kept $DIR (nothing mounted)"
	else
		rm -rf --one-file-system "$DIR"
	fi
	say "total $(($(now) - T0)) s:$times"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount_in() { # type dest [options]
	mkdir -p "$ROOT$2"
	mount -t "$1" ${3:+-o "$3"} "$1" "$ROOT$2"
	MOUNTS="$ROOT$2 $MOUNTS"
}

# ---------------------------------------------------------------- the chroot
if ! command -v debootstrap >/dev/null 2>&1; then
	say "installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		debootstrap >/dev/null || {
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends debootstrap >/dev/null
	}
fi
say "debootstrap $SUITE from $MIRROR into $ROOT"
debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >"$DIR/debootstrap.log" 2>&1 ||
	{ tail -n 30 "$DIR/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
mount_in proc /proc
mount_in tmpfs /dev/shm mode=1777
mount_in devpts /dev/pts newinstance,ptmxmode=0666,mode=620
# no systemd in a chroot: keep the packages' scripts from starting daemons
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"
# names as this machine resolves them (minbase has no /etc/hosts: "localhost" would go to
# DNS, and every Slurm command would wait on it)
cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
cp /etc/hosts "$ROOT/etc/hosts"
grep -q '[[:space:]]localhost\([[:space:]]\|$\)' "$ROOT/etc/hosts" ||
	printf '127.0.0.1 localhost\n' >>"$ROOT/etc/hosts"
lap debootstrap

# ---------------------------------------------------------------- the source
# what git tracks plus new files it does not ignore: what a clone of this tree would hold
mkdir -p "$ROOT/src"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$SRC" ls-files -z --cached --others --exclude-standard |
		tar -C "$SRC" --null -T - --no-recursion --ignore-failed-read -cf - 2>/dev/null |
		tar -C "$ROOT/src" -xf -
else
	tar -C "$SRC" --exclude='./build*' -cf - . | tar -C "$ROOT/src" -xf -
fi

# ---------------------------------------------------------------- packages
# what `make deps` runs (minbase has no make yet: deps.sh brings it, with
# build-essential), then the Slurm daemons and tools slurm-local.sh needs
in_root sh -c 'cd /src && sh scripts/deps.sh' >&2
in_root sh -c 'cd /src && sh scripts/slurm-local.sh install' >&2
lap packages

# ---------------------------------------------------------------- build, Slurm, tests
in_root sh -c 'cd /src && make' >"$DIR/make.log" 2>&1 ||
	{ tail -n 40 "$DIR/make.log" >&2; die "make failed on Debian 13 (log above)"; }
in_root sh -c 'cd /src && ldd build/layoutbench' | grep -E 'libslurm|libcurl' | sed 's/^[[:space:]]*/ci-trixie: linked: /' >&2
lap build

slurm_started=1
in_root sh -c 'cd /src && sh scripts/slurm-local.sh start' >&2
lap slurm-start

fail=0
for pat in $TESTS_SEL; do
	in_root sh -c "cd /src && LB_SLURM_TESTS=1 LB_FUZZ=0 TESTS='$pat' make --no-print-directory test-run" ||
		fail=1
done
lap tests
in_root sh -c 'cd /src && sh scripts/slurm-local.sh stop' >&2 && slurm_started=0
[ "$fail" = 0 ] || die "tests failed on Debian 13 with Slurm 24.11"
say "Debian 13, Slurm $(in_root sh -c 'slurmd -V' | sed 's/^[^0-9]*//'): every test passed"
