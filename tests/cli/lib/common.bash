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

# A small MovieLens-style ratings.csv for `prepare --from`: FILE SEED USERS ITEMS PER_USER (each
# user rates PER_USER distinct movies out of 1..ITEMS-1, ratings and timestamps random, seeded).
write_ratings() {
  python3 - "$@" <<'PY'
import random, sys
path, seed, users, items, per_user = sys.argv[1], *map(int, sys.argv[2:6])
r = random.Random(seed)
with open(path, "w") as f:
    f.write("userId,movieId,rating,timestamp\n")
    for u in range(1, users + 1):
        for m in r.sample(range(1, items), per_user):
            f.write(f"{u},{m},{r.choice([1,2,3,4,5])},{r.randrange(10**6)}\n")
PY
}

# `cmd | contains PATTERN`: grep -q that reads all of its input. A plain `grep -q` exits at the
# first match, the writer then dies of SIGPIPE, and under pipefail the pipeline fails (exit 141).
contains() { grep "$@" > /dev/null; }
