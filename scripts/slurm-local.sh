#!/bin/sh
# A single-node Slurm on localhost for CI and for trying layoutbench without a cluster:
# munged, slurmctld, slurmd and two slurmrestd (JWT over TCP, and local auth over a unix
# socket), each a background process whose PID is recorded, stopped by that PID. Works
# with Debian 12's Slurm 22.05 and Debian 13's 24.11 alike: slurmrestd loads the OpenAPI
# plugin it has (openapi/slurmctld from 23.11 on, serving every version it knows; else
# the newest openapi/v0.0.N), and from 24.05 on cgroup.conf says CgroupPlugin=disabled
# (this cluster tracks processes without cgroups, so it runs where no cgroup tree is
# mounted, as in a container or a chroot).
#
#   sh scripts/slurm-local.sh start   # install what is missing (apt-get), configure, start,
#                                     # wait until the node is idle and REST answers
#   sh scripts/slurm-local.sh stop    # cancel every job, stop the daemons by PID
#   sh scripts/slurm-local.sh status  # what runs
#   sh scripts/slurm-local.sh check   # only the safety check below (exit 1: would refuse)
#   sh scripts/slurm-local.sh install # only install what is missing (apt-get)
#
# It writes /etc/slurm/slurm.conf. To keep a real cluster node's configuration safe it
# refuses unless CI=true, LB_SLURM_LOCAL_FORCE=1, /etc/slurm/slurm.conf is absent, or that
# file was written by this script (its first line is the marker below).
# After start, "$LB_SLURM_DIR/env" (default /run/layoutbench-slurm/env, mode 600) holds
# SLURMRESTD_URL, SLURMRESTD_SOCKET, SLURMRESTD_USER and SLURMRESTD_TOKEN (never SLURM_JWT:
# with SLURM_JWT set, srun fails) and SLURMRESTD_LOG (the TCP slurmrestd's log, where the
# end-to-end test reads which OpenAPI version the client spoke); the tests source it.
# Knobs: LB_SLURM_CPUS (8: declared, above the real cores, so an 8-rank job fits),
# LB_SLURM_MEM_MB (8192), LB_SLURM_GPUS (2 fake GPUs), LB_SLURM_MIN_JOB_AGE (300 s),
# LB_SLURM_REST_PORT (6820), LB_SLURM_DIR, LB_SLURM_INSTALL (1: apt-get what is missing),
# LB_SLURM_CONF (/etc/slurm/slurm.conf: the file the safety check looks at and writes),
# LB_SLURM_OPENAPI (the slurmrestd -s plugins; default: chosen as above).
set -eu

MARKER="# written by layoutbench scripts/slurm-local.sh"
DIR=${LB_SLURM_DIR:-/run/layoutbench-slurm}
CPUS=${LB_SLURM_CPUS:-8}
MEM=${LB_SLURM_MEM_MB:-8192}
GPUS=${LB_SLURM_GPUS:-2}
MIN_JOB_AGE=${LB_SLURM_MIN_JOB_AGE:-300}
PORT=${LB_SLURM_REST_PORT:-6820}
OPENAPI=${LB_SLURM_OPENAPI:-}
INSTALL=${LB_SLURM_INSTALL:-1}
CONF=${LB_SLURM_CONF:-/etc/slurm/slurm.conf}
STATE=/var/lib/slurm/slurmctld
SPOOL=/var/lib/slurm/slurmd
LOGDIR=/var/log/slurm
FAKEGPU=/var/lib/slurm/fakegpu
NODE=localhost
SU=slurm

say() { echo "slurm-local: $*" >&2; }
die() {
	echo "error: slurm-local: $*" >&2
	exit 1
}
# alive PID: the process exists and is not a zombie (kill -0 says yes for zombies)
alive() { [ -d "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
pid_of() { [ -s "$DIR/$1.pid" ] && cat "$DIR/$1.pid"; }

start_bg() { # name logfile cmd...
	name=$1 logf=$2
	shift 2
	nohup "$@" </dev/null >>"$logf" 2>&1 &
	echo $! >"$DIR/$name.pid"
}

wait_for() { # name seconds logfile cmd...: poll cmd until it succeeds while name lives
	wname=$1 secs=$2 logf=$3
	shift 3
	wpid=$(pid_of "$wname")
	n=0
	while ! "$@" >/dev/null 2>&1; do
		msg=""
		if ! alive "$wpid"; then
			msg="$wname (pid $wpid) died while starting (log $logf)"
		elif [ "$n" -ge $((secs * 5)) ]; then
			msg="$wname did not become ready in $secs s (log $logf)"
		fi
		if [ -n "$msg" ]; then
			# the message is made before stop_all, which reuses the shell's variables
			tail -n 20 "$logf" >&2 2>/dev/null || true
			stop_all || true
			die "$msg"
		fi
		n=$((n + 1))
		sleep 0.2
	done
}

# The Slurm release as one number, 2411 for 24.11.5 (slurmd -V: "slurm-wlm 24.11.5").
slurm_release() {
	slurmd -V 2>/dev/null | sed -n 's/^[^0-9]*\([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p' |
		awk 'NR == 1 { printf "%d%02d\n", $1, $2 }'
}

# The OpenAPI plugin(s) for slurmrestd -s: what the installed slurmrestd lists. It needs
# the configuration, and from 24.11 on a running munged. 22.05 lists on stderr with a
# "slurmrestd: " prefix, 24.11 on stdout without.
choose_openapi() {
	[ -n "$OPENAPI" ] && return 0
	list=$(SLURMRESTD_SECURITY=disable_user_check slurmrestd -s list 2>&1 |
		sed -n 's|^\(slurmrestd: \)\{0,1\}\(openapi/[A-Za-z0-9._]*\)$|\2|p')
	if echo "$list" | grep -qx 'openapi/slurmctld'; then
		OPENAPI=openapi/slurmctld
	else
		OPENAPI=$(echo "$list" | grep -x 'openapi/v0\.0\.[0-9]*' | sort -t. -k3,3n | tail -n 1)
	fi
	[ -n "$OPENAPI" ] && return 0
	echo "error: slurm-local: slurmrestd lists no OpenAPI plugin for slurmctld:" \
		"$(echo "$list" | tr '\n' ' ')(set LB_SLURM_OPENAPI)" >&2
	return 1
}

# 0 when slurmrestd at base answers the newest /slurm/v0.0.N/ping its OpenAPI document
# lists (with escaped slashes, "\/slurm\/v0.0.38\/ping"; 24.11 ends it with a slash).
rest_ok() { # base curl-args...
	base=$1
	shift
	# shellcheck disable=SC1003 # tr deletes backslashes
	p=$(curl -sf "$@" "$base/openapi/v3" | tr -d '\\' | grep -o '"/slurm/v0\.0\.[0-9]*/ping/\{0,1\}"' |
		tr -d '"' | sort -t. -k3,3n | tail -n 1)
	[ -n "$p" ] && curl -sf "$@" "$base$p" >/dev/null
}

check_safe() {
	[ -f "$CONF" ] || return 0
	[ "${CI:-}" = true ] && return 0
	[ "${LB_SLURM_LOCAL_FORCE:-}" = 1 ] && return 0
	[ "$(head -n 1 "$CONF")" = "$MARKER" ] && return 0
	die "$CONF exists and was not written by this script: refusing to overwrite a real" \
		"cluster's configuration (set LB_SLURM_LOCAL_FORCE=1 to overwrite it anyway)"
}

install_missing() {
	pkgs="munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin libslurm-dev libpmi2-0-dev curl"
	# shellcheck disable=SC2086
	missing=$(sh "$(dirname "$0")/deps.sh" --missing $pkgs)
	[ -z "$missing" ] && return 0
	[ "$INSTALL" = 1 ] || die "missing packages:$missing (apt-get install$missing)"
	say "installing:$missing"
	added_policy=0
	# no systemd: keep the packages' postinst from starting daemons; we start them
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		added_policy=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
	[ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
	return 0
}

write_config() {
	mkdir -p /etc/slurm "$STATE" "$SPOOL" "$LOGDIR" /run/munge /var/log/munge /var/lib/munge
	# a fresh cluster every start: job ids from 1, no stale DRAIN/INVAL node state
	rm -rf "${STATE:?}"/* "${SPOOL:?}"/*
	rm -f "$LOGDIR"/slurmctld.log "$LOGDIR"/slurmd.log "$LOGDIR"/jobcomp.log "$LOGDIR"/*.out \
		"$LOGDIR"/slurmrestd-*.log
	chown "$SU:" "$STATE" "$LOGDIR"
	chown munge:munge /run/munge /var/log/munge /var/lib/munge
	chmod 755 /run/munge
	chmod 700 /var/log/munge /var/lib/munge
	if [ ! -s /etc/munge/munge.key ]; then
		mkdir -p /etc/munge
		dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
	fi
	chown -R munge:munge /etc/munge
	chmod 700 /etc/munge
	chmod 400 /etc/munge/munge.key
	dd if=/dev/urandom of="$STATE/jwt_hs256.key" bs=32 count=1 status=none
	chown "$SU:" "$STATE/jwt_hs256.key"
	chmod 600 "$STATE/jwt_hs256.key"

	gres_types="" gres_node=""
	if [ "$GPUS" -gt 0 ]; then
		# gres/gpu needs device files; symlinks to /dev/null pass as devices
		rm -rf "$FAKEGPU"
		mkdir -p "$FAKEGPU"
		i=0
		while [ "$i" -lt "$GPUS" ]; do
			ln -s /dev/null "$FAKEGPU/gpu$i"
			i=$((i + 1))
		done
		{
			echo "$MARKER"
			echo "AutoDetect=off"
			echo "NodeName=$NODE Name=gpu Type=fake File=$FAKEGPU/gpu[0-$((GPUS - 1))]"
		} >/etc/slurm/gres.conf
		gres_types="GresTypes=gpu"
		gres_node="Gres=gpu:fake:$GPUS"
	else
		rm -f /etc/slurm/gres.conf
	fi
	cat >"$CONF" <<EOF
$MARKER
# single-node cluster on localhost for CI; do not use on a real cluster
ClusterName=layoutbench-ci
SlurmctldHost=localhost
SlurmUser=$SU
AuthType=auth/munge
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$STATE/jwt_hs256.key
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGDIR/jobcomp.log
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MailProg=/bin/true
MinJobAge=$MIN_JOB_AGE
MaxArraySize=1001
KillWait=5
EnforcePartLimits=ALL
SlurmdParameters=config_overrides
$gres_types
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM $gres_node State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP DefMemPerCPU=256
EOF
	chmod 644 "$CONF"
	# No cgroups: processes are tracked by linuxproc and tasks are not confined. From
	# 24.05 on slurmd still opens the cgroup plugin unless told not to, and fails where no
	# cgroup tree is mounted; 22.05 to 23.11 do not know "disabled" and need no file.
	rel=$(slurm_release)
	if [ "${rel:-0}" -ge 2405 ]; then
		printf '%s\nCgroupPlugin=disabled\n' "$MARKER" >/etc/slurm/cgroup.conf
	elif [ "$(head -n 1 /etc/slurm/cgroup.conf 2>/dev/null)" = "$MARKER" ]; then
		rm -f /etc/slurm/cgroup.conf
	fi
}

stop_all() {
	ctld=$(pid_of slurmctld || true)
	sd=$(pid_of slurmd || true)
	if [ -n "$ctld" ] && alive "$ctld" && [ -n "$sd" ] && alive "$sd"; then
		jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
		if [ -n "$(echo "$jobs" | tr -d ' ')" ]; then
			say "cancelling jobs: $jobs"
			# shellcheck disable=SC2086
			scancel $jobs 2>/dev/null || true
			n=0
			while [ -n "$(squeue -h -o %A 2>/dev/null)" ] && [ "$n" -lt 50 ]; do
				sleep 0.2
				n=$((n + 1))
			done
		fi
		for p in $(scontrol listpids 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ {print $1}'); do
			kill -KILL "$p" 2>/dev/null || true
		done
	fi
	rc=0
	for name in slurmrestd-jwt slurmrestd-unix slurmd slurmctld munged; do
		pid=$(pid_of "$name" || true)
		[ -n "$pid" ] || continue
		if alive "$pid"; then
			kill -TERM "$pid" 2>/dev/null || true
			n=0
			while alive "$pid" && [ "$n" -lt 50 ]; do
				sleep 0.2
				n=$((n + 1))
			done
			if alive "$pid"; then
				kill -KILL "$pid" 2>/dev/null || true
				sleep 0.5
			fi
			if alive "$pid"; then
				echo "error: slurm-local: $name (pid $pid) is still alive" >&2
				rc=1
				continue
			fi
			say "stopped $name ($pid)"
		fi
		rm -f "$DIR/$name.pid"
	done
	rm -f "$DIR/slurmrestd.sock" "$DIR/env"
	[ "$rc" = 0 ] && rm -f /run/slurmctld.pid /run/slurmd.pid
	return $rc
}

start() {
	[ "$(id -u)" = 0 ] || die "must run as root (it writes $CONF and starts daemons)"
	check_safe
	install_missing
	for b in munged slurmctld slurmd slurmrestd sbatch scontrol sinfo curl setpriv; do
		command -v "$b" >/dev/null 2>&1 || die "'$b' is not installed"
	done
	if [ -d "$DIR" ] && ls "$DIR"/*.pid >/dev/null 2>&1; then
		say "a previous instance is recorded in $DIR: stopping it"
		stop_all || true
	fi
	mkdir -p "$DIR"
	chmod 755 "$DIR"
	write_config
	say "config written ($CONF: Slurm $(slurmd -V 2>/dev/null | sed 's/^[^0-9]*//'), CPUs=$CPUS, ${MEM} MB, $GPUS fake GPUs)"

	start_bg munged /var/log/munge/munged.out \
		setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F
	wait_for munged 15 /var/log/munge/munged.out sh -c 'munge -n | unmunge'
	start_bg slurmctld "$LOGDIR/slurmctld.out" /usr/sbin/slurmctld -D
	wait_for slurmctld 30 "$LOGDIR/slurmctld.log" sh -c 'scontrol ping | grep -q "is UP"'
	start_bg slurmd "$LOGDIR/slurmd.out" /usr/sbin/slurmd -D -N "$NODE"
	wait_for slurmd 30 "$LOGDIR/slurmd.log" \
		sh -c "[ \"\$(sinfo -h -N -n $NODE -o %T)\" = idle ]"

	if ! choose_openapi; then
		stop_all || true
		exit 1
	fi
	say "slurmrestd -s $OPENAPI"
	# REST (a): JWT over TCP; slurmrestd refuses root, so it drops to nobody.
	start_bg slurmrestd-jwt "$LOGDIR/slurmrestd-jwt.log" env SLURM_JWT=daemon \
		/usr/sbin/slurmrestd -u nobody -g nogroup -a rest_auth/jwt -s "$OPENAPI" \
		"127.0.0.1:$PORT"
	# REST (b): unix socket, local auth: the client uid must equal the server's (root).
	rm -f "$DIR/slurmrestd.sock"
	start_bg slurmrestd-unix "$LOGDIR/slurmrestd-unix.log" env \
		SLURMRESTD_SECURITY=disable_user_check /usr/sbin/slurmrestd -a rest_auth/local \
		-s "$OPENAPI" "unix:$DIR/slurmrestd.sock"
	token=$(scontrol token username=root lifespan=86400 | sed -n 's/^SLURM_JWT=//p')
	[ -n "$token" ] || {
		stop_all
		die "'scontrol token' gave no token (is slurm-wlm-jwt-plugin installed?)"
	}
	wait_for slurmrestd-jwt 15 "$LOGDIR/slurmrestd-jwt.log" rest_ok "http://127.0.0.1:$PORT" \
		-H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $token"
	wait_for slurmrestd-unix 15 "$LOGDIR/slurmrestd-unix.log" rest_ok http://localhost \
		--unix-socket "$DIR/slurmrestd.sock"
	umask 077
	cat >"$DIR/env" <<EOF
export SLURMRESTD_URL=http://127.0.0.1:$PORT
export SLURMRESTD_SOCKET=$DIR/slurmrestd.sock
export SLURMRESTD_USER=root
export SLURMRESTD_TOKEN=$token
export SLURMRESTD_LOG=$LOGDIR/slurmrestd-jwt.log
EOF
	say "ready: node $NODE idle ($CPUS CPUs), REST on 127.0.0.1:$PORT and unix:$DIR/slurmrestd.sock; env in $DIR/env"
}

status() {
	for name in munged slurmctld slurmd slurmrestd-jwt slurmrestd-unix; do
		pid=$(pid_of "$name" || true)
		if [ -n "$pid" ] && alive "$pid"; then
			echo "$name running (pid $pid)"
		else
			echo "$name stopped"
		fi
	done
}

case "${1:-}" in
start) start ;;
stop) stop_all ;;
status) status ;;
check) check_safe ;;
install)
	[ "$(id -u)" = 0 ] || die "must run as root (apt-get)"
	install_missing
	;;
*)
	echo "usage: sh scripts/slurm-local.sh start|stop|status|check|install" >&2
	exit 2
	;;
esac
