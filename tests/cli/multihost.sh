# Several nodes for real, on one machine: 2 network namespaces ("hosts", launch/netns-hosts) on a
# bridge in a third namespace, Open MPI over TCP between them (mpirun inside host 1, launch/nsagent
# instead of ssh), 2 ranks per host:
#  (a) ncf mini trains to its real target (hr@10 0.27) on 2 nodes x 1 rank (sparse embedding rows
#      chosen: ~4 epochs, a minute or two; 2 x 2 ranks needs 11 epochs at the default seed), and
#      `mlperf-dist check` passes;
#  (b) 30 steps across hosts give the parameters of one host, grouped by node alike or not, bit for
#      bit (2x2 against 1x4 grouped by 2 and against a plain 1x4; 4x1 against 1x4), and 2 x 2
#      ranks choose the hierarchical backend;
#  (c) faults end the job non-zero within the watchdog timeout + 5 s, leaving no temporary file and
#      no result claiming success: host 2's link cut mid-run, a rank on host 2 SIGKILLed, SIGTERM to
#      mpirun.
# Every namespace is removed at the end, also on failure. SKIP only where namespaces are forbidden.
source "$(dirname "$0")/lib/common.bash" "$@"
source "$(dirname "$0")/lib/netns.bash"
netns_require
command -v Rscript > /dev/null || fail "Rscript not found: run launch/install-deps (r-base-core r-cran-dslabs)"
"$BIN" prepare --benchmark ncf --scale mini --data-dir "$DATA" > "$WORK/prep.txt" 2>&1 || { cat "$WORK/prep.txt"; fail "prepare failed"; }
T0=$(date +%s.%N)
now() { echo "$(date +%s.%N) - $T0" | bc; }
H1=${NS_PREFIX}h1 H2=${NS_PREFIX}h2
netns_up 2 2 > "$WORK/hosts2"                 # H1 slots=2, H2 slots=2: ranks 0,1 on H1; 2,3 on H2
echo "$H1 slots=4" > "$WORK/hosts1"           # the same 4 ranks on one host
printf '%s slots=1\n%s slots=1\n' "$H1" "$H2" > "$WORK/hosts2x1"
TRAIN=(train --benchmark ncf --scale mini --data-dir "$DATA" --system mh)
failures=()

# (a) To the real target across 2 nodes.
t=$(now)
rc=0
NS_TIMEOUT=600 ns_mpirun "$WORK/hosts2x1" 2 "$BIN" "${TRAIN[@]}" --results-dir "$WORK/ra" \
  --progress-seconds 1000 > "$WORK/a.txt" 2>&1 || rc=$?
echo "(a) train to target on 2 nodes: rc=$rc in $(echo "$(now) - $t" | bc)s"
[ $rc -eq 0 ] || { tail -30 "$WORK/a.txt"; fail "(a) training failed: rc $rc"; }
grep -q "^status: success" "$WORK/a.txt" || { tail -30 "$WORK/a.txt"; fail "(a) did not reach the target"; }
grep -q "2 rank(s) on 2 node(s)" "$WORK/a.txt" || { head "$WORK/a.txt"; fail "(a) the start-up line does not say 2 nodes"; }
grep -m1 "^communication: comm:" "$WORK/a.txt" || true
grep -m1 "sparse embeddings" "$WORK/a.txt" || true
log=$(sed -n 's/^result log: //p' "$WORK/a.txt")
"$BIN" check "$log" > "$WORK/check.txt" 2>&1 || { cat "$WORK/check.txt"; fail "(a) check rejected the log"; }
grep -q "PASSED" "$WORK/check.txt" || { cat "$WORK/check.txt"; fail "(a) check did not pass"; }
grep -E "^eval epoch|^time to train|^throughput" "$WORK/a.txt"

# (b) The cross-node path is exact and the sum does not depend on the node layout (rank order,
# comm/reduce_kernels.h): across hosts the parameters equal a one-host run that groups the ranks by
# node the same way (--test-ranks-per-node 2 for 2 hosts x 2 ranks; 4 hosts x 1 rank against one
# host) and a plain one-host run, bit for bit (--max-steps ends with exit 3, aborted).
short() {  # short HOSTFILE OUT.bin LOG [train args]
  local hosts=$1 bin=$2 log=$3 rc=0
  shift 3
  NS_TIMEOUT=120 ns_mpirun "$hosts" 4 "$BIN" "${TRAIN[@]}" --results-dir "$WORK/rb" --max-steps 30 \
    --progress-seconds 1000 --dump-params "$bin" "$@" > "$log" 2>&1 || rc=$?
  [ $rc -eq 3 ] && [ -s "$bin" ] || { tail -20 "$log"; fail "(b) the 30-step run on $hosts failed: rc $rc"; }
  grep -m1 "^communication: comm:" "$log"
}
t=$(now)
short "$WORK/hosts2" "$WORK/p2x2.bin" "$WORK/b2.txt"
comm=$(grep -m1 "^communication: comm:" "$WORK/b2.txt" || true)
echo "$comm" | contains "hierarchical" && echo "$comm" | contains "2 node(s) x 2 ranks" ||
  failures+=("(b) not the hierarchical backend across 2 nodes x 2 ranks: '$comm'")
short "$WORK/hosts1" "$WORK/p1x4g.bin" "$WORK/b1g.txt" --test-ranks-per-node 2
if cmp -s "$WORK/p2x2.bin" "$WORK/p1x4g.bin"; then
  echo "(b) 2 hosts x 2 ranks == 1 host x 4 ranks grouped by 2: bit-identical parameters"
else
  failures+=("(b) 2 hosts x 2 ranks and 1 host x 4 ranks grouped by 2 differ: the cross-node path is not exact")
  echo "FAIL: ${failures[-1]}" >&2
fi
netns_up 4 1 d > "$WORK/hosts4"
short "$WORK/hosts4" "$WORK/p4x1.bin" "$WORK/b4.txt"
short "$WORK/hosts1" "$WORK/p1x4.bin" "$WORK/b1.txt"
if cmp -s "$WORK/p4x1.bin" "$WORK/p1x4.bin"; then
  echo "(b) 4 hosts x 1 rank == 1 host x 4 ranks: bit-identical parameters"
else
  failures+=("(b) 4 hosts x 1 rank and 1 host x 4 ranks differ: the cross-node path is not exact")
  echo "FAIL: ${failures[-1]}" >&2
fi
if cmp -s "$WORK/p2x2.bin" "$WORK/p1x4.bin"; then
  echo "(b) 2 hosts x 2 ranks == 1 host x 4 ranks: bit-identical parameters (rank order)"
else
  n=$( (cmp -l "$WORK/p2x2.bin" "$WORK/p1x4.bin" || true) | wc -l)
  failures+=("(b) 2 hosts x 2 ranks and a plain 1 host x 4 ranks differ in $n bytes: the sum depends on the node layout")
  echo "FAIL: ${failures[-1]}" >&2
fi
echo "(b) four 30-step runs in $(echo "$(now) - $t" | bc)s"

# (c) Faults, with --comm-timeout 10: the job must end non-zero within 10 + 5 s of the fault.
TIMEOUT=10
NFAULT=0
fault() {  # fault NAME ACTION: on 2 fresh hosts, start a long run, wait for training, ACTION, measure
  local name=$1 action=$2 r=$WORK/rc_$1 out=$WORK/c_$1.txt set=c$((++NFAULT))
  netns_up 2 2 $set > "$WORK/hosts_$name"
  H1=$NS_PREFIX${set}h1 H2=$NS_PREFIX${set}h2
  ns_mpirun "$WORK/hosts_$name" 4 "$BIN" "${TRAIN[@]}" --results-dir "$r" --comm-timeout $TIMEOUT \
    --progress-seconds 0.5 > "$out" 2>&1 &
  local job=$! i
  for i in $(seq 600); do grep -q "^epoch 1 step" "$out" && break; kill -0 $job 2>/dev/null || break; sleep 0.1; done
  grep -q "^epoch 1 step" "$out" || { cat "$out"; fail "(c) $name: the run did not start training"; }
  sleep 1
  local tf
  tf=$(date +%s.%N)
  $action
  local td="" te rc=0 limit
  limit=$(echo "$tf + $TIMEOUT + 5" | bc)
  while kill -0 $job 2>/dev/null; do
    [ -z "$td" ] && grep -qE "watchdog:|mpirun noticed|ORTE has lost|exited on signal|non-zero|aborted|stop requested" "$out" && td=$(date +%s.%N)
    [ "$(echo "$(date +%s.%N) > $limit + 20" | bc)" = 1 ] && break
    sleep 0.05
  done
  te=$(date +%s.%N)
  if kill -0 $job 2>/dev/null; then
    tail -20 "$out"
    kill -9 $job 2>/dev/null || true
    wait $job 2>/dev/null || true
    failures+=("(c) $name: the job was still running $(echo "$te - $tf" | bc)s after the fault (limit $TIMEOUT + 5 s)")
    echo "FAIL: ${failures[-1]}" >&2
    "$NETNS_HOSTS" down "$NS_PREFIX$set"
    return 0
  fi
  wait $job || rc=$?
  local detect=${td:+$(echo "$td - $tf" | bc)} exit_s
  exit_s=$(echo "$te - $tf" | bc)
  echo "(c) $name: rc=$rc, detected after ${detect:-?}s, exited after ${exit_s}s"
  grep -m1 -E "watchdog:" "$out" | cut -c1-240 || true
  local bad=""
  [ $rc -ne 0 ] || bad+=" exit 0;"
  [ "$(echo "$exit_s > $TIMEOUT + 5" | bc)" = 0 ] || bad+=" took ${exit_s}s;"
  find "$r" -name '*.tmp' 2>/dev/null | contains . && bad+=" temporary files left: $(find "$r" -name '*.tmp');"
  grep -lq '"status":"success"' $(find "$r" -name 'result_*.txt' 2>/dev/null) /dev/null && bad+=" a result claims success;"
  if [ -n "$bad" ]; then
    tail -15 "$out"
    failures+=("(c) $name:$bad")
    echo "FAIL: ${failures[-1]}" >&2
  fi
  "$NETNS_HOSTS" down "$NS_PREFIX$set"  # also ends what the fault left running in them
}
cut_link() { "$NETNS_HOSTS" link "$H2" down; }
kill_rank() {
  local p
  p=($(ns_rank_pids "$H2"))
  [ ${#p[@]} -gt 0 ] || fail "(c) no rank process in $H2"
  kill -KILL "${p[0]}"
}
term_mpirun() {
  local p=""
  for q in $(ip netns pids "$H1"); do [ "$(cat /proc/$q/comm 2>/dev/null)" = mpirun ] && p=$q; done
  [ -n "$p" ] || fail "(c) no mpirun in $H1"
  kill -TERM "$p"
}
fault link_cut cut_link
fault sigkill_rank kill_rank
fault sigterm_mpirun term_mpirun

echo "multihost: total $(now)s"
if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAIL: %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "multihost: ok"
