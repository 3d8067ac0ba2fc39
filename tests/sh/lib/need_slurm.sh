# Sourced by the tests that submit to a real Slurm: skip (exit 77, the reason on the last
# line) unless LB_SLURM_TESTS=1 and slurmctld answers; load the local cluster's
# environment (scripts/slurm-local.sh writes it) and leave SLURM_JWT unset.
skip="no Slurm (set LB_SLURM_TESTS=1 and run scripts/slurm-local.sh start)"
[ "${LB_SLURM_TESTS:-0}" = 1 ] || { echo "$skip"; exit 77; }
envf=${LB_SLURM_DIR:-/run/layoutbench-slurm}/env
# shellcheck disable=SC1090
[ -r "$envf" ] && . "$envf"
unset SLURM_JWT
case "$(scontrol ping 2>&1)" in *"is UP"*) ;; *) echo "$skip"; exit 77 ;; esac
