# Shared by the CLI tests: arguments, a scratch dir, the prepared mini data, and assertions.
set -euo pipefail
BIN=$1
SRC=$2
BUILD=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
DATA=$BUILD/testdata
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader)

fail() { echo "FAIL: $*" >&2; exit 1; }

ensure_mini_data() {
  "$BIN" prepare --benchmark resnet --scale mini --data-dir "$DATA" > /dev/null
}
