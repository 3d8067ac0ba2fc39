#!/bin/sh
# Install the Debian packages that layoutbench builds and tests with (Debian 12 and 13: no
# name below is tied to one release). Idempotent: installs only what is missing. As
# non-root it prints the command to run instead.
# --check: only report (exit 1 with the command to run) when something is missing.
# --missing PKG...: print those of the named packages that are not installed (one line),
# for the other scripts that install what they need (scripts/slurm-local.sh).
# --install PKG...: install those of the named packages that are missing (as root; as
# non-root print the command and exit 1): a package only one command needs
# (scripts/paper-data.sh: xlsx2csv, git), installed when that command runs.
# Why each package is needed: README.md, "Dependencies". The fuzzing runtime (libFuzzer)
# is libclang-rt-dev, the distribution's default for its default clang (clang 14's on
# Debian 12, clang 19's on Debian 13), not a versioned libclang-rt-N-dev.
set -eu
PKGS="build-essential pkg-config libsqlite3-dev sqlite3 libcjson-dev libcurl4-openssl-dev
libcmocka-dev gnuplot-nox libslurm-dev slurm-client clang libclang-rt-dev cmark
valgrind"
missing_of() {
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			printf ' %s' "$p"
	done
}
if [ "${1:-}" = "--missing" ]; then
	shift
	missing_of "$@"
	echo
	exit 0
fi
if [ "${1:-}" = "--install" ]; then
	shift
	PKGS="$*"
	set -- ""
fi
# shellcheck disable=SC2086
missing=$(missing_of $PKGS)
[ -z "$missing" ] && exit 0
cmd="apt-get install -y --no-install-recommends$missing"
if [ "${1:-}" = "--check" ]; then
	echo "error: missing Debian packages:$missing (run 'make deps', or as root: apt-get update && $cmd)" >&2
	exit 1
fi
if [ "$(id -u)" != 0 ]; then
	echo "layoutbench needs these Debian packages:$missing" >&2
	echo "run as root: apt-get update && $cmd" >&2
	exit 1
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
