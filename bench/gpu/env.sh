# Sourced by the device scripts of bench/gpu (after they set BUILD, from the repository
# root): NCCL's NVLink multicast stays off on every device call (NCCL_NVLS_ENABLE=0), and
# $BUILD/lib, when there is one (the unit tests' cmocka, a host CLI's SQLite and cJSON),
# goes first on LD_LIBRARY_PATH as an absolute path.
export NCCL_NVLS_ENABLE=0
if [ -n "${BUILD:-}" ] && [ -d "$BUILD/lib" ]; then
	case $BUILD in
	/*) LD_LIBRARY_PATH="$BUILD/lib:${LD_LIBRARY_PATH:-}" ;;
	*) LD_LIBRARY_PATH="$(pwd)/$BUILD/lib:${LD_LIBRARY_PATH:-}" ;;
	esac
	export LD_LIBRARY_PATH
fi
