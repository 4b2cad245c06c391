# Multi-node on one machine for the CLI tests: namespace "hosts" from launch/netns-hosts and
# Open MPI across them (mpirun inside the first host, launch/nsagent instead of ssh, TCP on eth0).
# Source after common.bash. Sets NS_PREFIX (unique per test process) and removes every namespace
# it made (and the processes left in them, and /etc/netns/<name>) on exit, also on failure.

NETNS_HOSTS=$SRC/launch/netns-hosts
NS_PREFIX=mpd$$
NS_SETS=()

netns_cleanup() {
  local p
  for p in "${NS_SETS[@]}"; do "$NETNS_HOSTS" down "$p" || true; done
}
trap 'netns_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP

# SKIP (exit 0) only when the kernel or the sandbox forbids namespaces or veth pairs; a missing
# tool is a failure (launch/install-deps installs iproute2).
netns_require() {
  command -v ip > /dev/null || fail "ip not found: run launch/install-deps (iproute2)"
  command -v unshare > /dev/null || fail "unshare not found (util-linux)"
  local probe=${NS_PREFIX}probe err
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "SKIP: cannot create a network namespace: $err"; exit 0
  fi
  if ! err=$(ip -n "$probe" link add vp0 type veth peer name vp1 2>&1 &&
             ip -n "$probe" link add br0 type bridge 2>&1); then
    ip netns del "$probe" 2>/dev/null || true
    echo "SKIP: veth or bridge not available: $err"; exit 0
  fi
  ip netns del "$probe"
}

# netns_up N SLOTS [SUFFIX] > HOSTFILE: N hosts ${NS_PREFIX}${SUFFIX}h1..N, registered for cleanup.
netns_up() {
  local p=$NS_PREFIX${3:-}
  NS_SETS+=("$p")
  "$NETNS_HOSTS" up "$1" "$p" "$2"
}

# ns_mpirun HOSTFILE NP ARGS...: mpirun started inside the hostfile's first host, killed after
# NS_TIMEOUT seconds (default 300).
# Keepalive on Open MPI's own (out-of-band) connections: a host that drops off the network is
# declared lost in ~4 s, not after the kernel's TCP give-up (minutes), so mpirun ends the job.
ns_mpirun() {
  local hostfile=$1 np=$2; shift 2
  local first
  first=$(awk 'NR == 1 { print $1 }' "$hostfile")
  timeout -k 5 "${NS_TIMEOUT:-300}" "$NETNS_HOSTS" exec "$first" mpirun --allow-run-as-root -np "$np" --hostfile "$hostfile" \
    --mca plm_rsh_agent "$SRC/launch/nsagent" \
    --mca btl tcp,vader,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
    --mca oob_tcp_keepalive_time 1 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 \
    "$@"
}

# The pids of the training ranks running in host NS.
ns_rank_pids() {
  local p
  for p in $(ip netns pids "$1" 2>/dev/null); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = mlperf-dist ] && echo "$p"
  done
  return 0
}
