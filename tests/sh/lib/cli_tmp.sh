# Sourced by the tests that run the CLI from a scratch folder: LB is the layoutbench binary
# as an absolute path ($BUILD, default build), root the repository, tmp a folder removed on
# exit, which becomes the working directory; fail starts at 0.
LB=${BUILD:-build}/layoutbench
root=$(pwd)
case "$LB" in /*) ;; *) LB="$root/$LB" ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail=0
