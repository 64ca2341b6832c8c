# A cluster of 3 hosts on this machine, for the multi-host tests (tests/cluster/netns*.sh). Source it
# after tests/lib.sh.
# Each host is a network namespace (tsl-h0, tsl-h1, tsl-h2) with one veth link to a bridge (tsl-br) in
# this namespace, at 10.77.0.10 + i/24 (this namespace: 10.77.0.1). Open MPI launches a rank on a host
# through ./agent, which enters the host's namespaces; ranks talk over TCP only (no shared memory across
# hosts): netns_mpirun. Host i's link is tsl-v<i> on this side: `ip link set tsl-v1 down` cuts host 1 off.
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); netns_up skips the test (exit 77) where it cannot build them.
NETNS_HOSTS=(tsl-h0 tsl-h1 tsl-h2)
NETNS_SUBNET=10.77.0.0/24
NETNS_AGENT=$TESSEL_SOURCE_DIR/tests/cluster/netns/agent
# The node-local spill path: a tmpfs of its own on every host (see ./agent), TESSEL_NETNS_SPILL_MB_<host> MB.
export TESSEL_NETNS_SPILL=/run/tessel-netns-spill

netns_down() {
  local i
  for i in "${!NETNS_HOSTS[@]}"; do
    # What a test left running there (a rank cut off from the others, Open MPI's daemon) goes too.
    ip netns pids "${NETNS_HOSTS[$i]}" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "${NETNS_HOSTS[$i]}" 2>/dev/null || true
    ip link del "tsl-v$i" 2>/dev/null || true
  done
  ip link del tsl-br 2>/dev/null || true
}

netns_up() {
  [ "$(id -u)" -eq 0 ] || skip "the 3-host cluster needs root (network namespaces)"
  command -v ip >/dev/null && command -v unshare >/dev/null || skip "the 3-host cluster needs ip(8) and unshare(1)"
  netns_down
  ip link add tsl-br type bridge 2>/dev/null || skip "cannot create a bridge here (no CAP_NET_ADMIN?)"
  at_exit netns_down
  ip addr add 10.77.0.1/24 dev tsl-br
  ip link set tsl-br up
  local i h
  for i in "${!NETNS_HOSTS[@]}"; do
    h=${NETNS_HOSTS[$i]}
    ip netns add "$h"
    ip link add "tsl-v$i" type veth peer name eth0 netns "$h"
    ip link set "tsl-v$i" master tsl-br up
    ip -n "$h" addr add "10.77.0.1$i/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$h" link set lo up
  done
  printf '%s slots=4\n' "${NETNS_HOSTS[@]}" > "$TESSEL_WORK/hostfile"
}

# netns_link HOST_INDEX down|up: cuts host i off the bridge, or brings it back and waits until the host
# can open a TCP connection to this namespace again (a port that was down drops frames for a moment, and
# the host may hold a failed neighbour entry), as Open MPI's daemon there will have to.
netns_link() {
  ip link set "tsl-v$1" "$2"
  [ "$2" = up ] || return 0
  python3 - "${NETNS_HOSTS[$1]}" <<'PY' || fail "host $1 cannot reach 10.77.0.1 after its link came back up"
import socket, subprocess, sys, time
server = socket.create_server(("10.77.0.1", 0))
port = server.getsockname()[1]
probe = f"exec 3<>/dev/tcp/10.77.0.1/{port}"
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    if subprocess.run(["ip", "netns", "exec", sys.argv[1], "timeout", "2", "bash", "-c", probe],
                      stderr=subprocess.DEVNULL).returncode == 0:
        sys.exit(0)
    time.sleep(0.2)
sys.exit(1)
PY
}

# netns_mpirun NP_PER_HOST... -- ARGS: mpirun over the hosts, ARGS as after `mpirun -np N`. With one
# count per host (e.g. `2 1 1`), host i gets that many ranks in rank order (rank 0, the coordinator, on
# tsl-h0). netns_mpirun_flags prints the flags that place them (the hostfile, the agent, TCP on the test
# subnet only); netns_mpirun adds the base flags of one machine (tests/lib.sh). A job adds
# --enable-recovery before its program, as on one host.
netns_mpirun_flags() {
  local counts=() c i
  while [ "${1:---}" != -- ]; do counts+=("$1"); shift; done
  : > "$TESSEL_WORK/hostfile"
  for i in "${!counts[@]}"; do
    c=${counts[$i]}
    [ "$c" -gt 0 ] && echo "${NETNS_HOSTS[$i]} slots=$c max_slots=$c" >> "$TESSEL_WORK/hostfile"
  done
  echo "--hostfile $TESSEL_WORK/hostfile" \
       "--map-by slot --mca plm_rsh_agent $NETNS_AGENT --mca btl tcp,self" \
       "--mca btl_tcp_if_include $NETNS_SUBNET --mca oob_tcp_if_include $NETNS_SUBNET"
}
# For scripts/tessel-mpirun: TESSEL_MPIRUN_ARGS="$(netns_mpirun_flags 2 1 1 --)" scripts/tessel-mpirun -np 4 ...
netns_mpirun() {
  local flags np=0
  flags=$(netns_mpirun_flags "$@")
  while [ "$1" != -- ]; do np=$((np + $1)); shift; done
  shift
  # shellcheck disable=SC2086
  mpirun "${MPIRUN_FLAGS[@]}" $flags -np $np "$@"
}
