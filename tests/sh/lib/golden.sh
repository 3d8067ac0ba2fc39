# Sourced by the tests that compare an output with a golden file. golden GOLDEN FRESH [WHAT]:
# with LB_UPDATE_GOLDEN=1 copies FRESH over GOLDEN (read the diff before committing);
# otherwise diffs them and, where they differ, says which (WHAT, or FRESH) and sets fail=1.
golden() {
	if [ "${LB_UPDATE_GOLDEN:-0}" = 1 ]; then
		cp "$2" "$1" && echo "updated $1"
	elif ! diff -u "$1" "$2"; then
		echo "FAIL: ${3:-$2} differs from $1 (LB_UPDATE_GOLDEN=1 regenerates it)"
		fail=1
	fi
}
