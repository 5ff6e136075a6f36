#!/usr/bin/env bash
# A real Slurm cluster in a test: installs Debian's slurm-wlm and munge if missing, starts a
# one-node cluster on localhost (munged with its own key and socket, slurmctld and slurmd in
# the foreground, a generated slurm.conf, loopback only, ports picked free), submits
# scripts/slurm_sweep.sbatch as a 4-task job array, waits for it, merges the shards and checks
# the merged errors.csv and summary.csv equal a single run byte for byte. Every daemon it
# started is stopped on exit (by its pid), success or not; nothing of the system's Slurm or
# munge configuration is touched (everything lives in a temporary directory).
#
#   scripts/test_slurm.sh            (as root, or it reruns itself with sudo; build/favor first)
# Environment: FAVOR (default build/favor), KEEP=1 keeps the temporary directory.
# Exit status: 0 ok, 1 a check failed, 77 Slurm could not run here (the reason is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/test_slurm.sh   (no arguments; as root or with sudo, after scripts/setup.sh)"; }
case ${1:-} in
  "") ;;
  -h|--help) usage; exit 0 ;;
  *) usage >&2; echo "test_slurm.sh: takes no arguments, got '$1'" >&2; exit 2 ;;
esac
root=$(pwd)
favor=$(readlink -f "${FAVOR:-build/favor}")
[ -x "$favor" ] || { echo "test_slurm: build favor first (scripts/setup.sh)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || exec sudo -E "$0"   # slurmd and munged need root
missing=()
for p in slurm-wlm munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[test_slurm] installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

dir=$(mktemp -d /tmp/favor-slurm.XXXXXX)
chmod 755 "$dir"
pids=()
stop_all() {
  local rc=$?
  if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
    scancel --quiet --name=favor-sweep 2>/dev/null || true
  fi
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    for log in "$dir"/*.log "$dir"/work/*.log; do
      [ -f "$log" ] && { echo "== $log"; tail -20 "$log"; }
    done
  fi
  [ "${KEEP:-0}" = 1 ] && echo "[test_slurm] kept $dir" || rm -rf "$dir"
  exit $rc
}
trap stop_all EXIT
trap 'exit 1' INT TERM
unavailable() { echo "test_slurm: Slurm cannot run here: $*" >&2; exit 77; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() {   # SECONDS WHAT COMMAND...
  local t=$1 what=$2; shift 2
  for _ in $(seq 1 $((t * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  unavailable "$what did not come up in $t s"
}

# munge: a private key and socket, run as the munge user in the foreground.
# (the key's directory private, the socket's open to all, as munged requires)
mkdir -p "$dir/munge" "$dir/munge-socket"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=1024 status=none
chown -R munge:munge "$dir/munge" "$dir/munge-socket"
chmod 700 "$dir/munge"; chmod 400 "$dir/munge/munge.key"; chmod 755 "$dir/munge-socket"
setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground \
  --key-file="$dir/munge/munge.key" --socket="$dir/munge-socket/socket" --pid-file="$dir/munge/munged.pid" \
  --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" 2>"$dir/munged.log" &
pids+=($!)
wait_for 10 munged munge --socket="$dir/munge-socket/socket" -n

# slurm.conf for one node, this machine's real CPU layout, loopback only.
node=$(slurmd -C | head -1 | sed -e 's/^NodeName=[^ ]*/NodeName=localhost NodeAddr=127.0.0.1/' -e 's/ RealMemory=[0-9]*/ RealMemory=1000/')
mkdir -p "$dir/state" "$dir/spool" "$dir/work"
export SLURM_CONF=$dir/slurm.conf
cat > "$SLURM_CONF" <<CONF
ClusterName=favortest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge-socket/socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=30
$node State=UNKNOWN
PartitionName=favor Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -D -i -f "$SLURM_CONF" 2>"$dir/slurmctld.err" &
pids+=($!)
wait_for 20 slurmctld scontrol ping
slurmd -D -N localhost -f "$SLURM_CONF" 2>"$dir/slurmd.err" &
pids+=($!)
idle() { sinfo -h -n localhost -o %T | grep -qx idle; }
wait_for 30 "slurmd (node localhost idle)" idle
echo "[test_slurm] cluster up: $(sinfo -h -o '%P %D %T %C')"

# The sweep: a small config, 4 array tasks, then a merge, against a single run.
cat > "$dir/work/c.json" <<'JSON'
{"name": "slurm", "seed": 11, "inputs": {"source": "random", "L": [128, 256], "d": 8, "scale": [0.5, 1.0]},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "iid"},
              {"features": "hyperbolic", "projection": "orthogonal"}],
 "m": [8, 16, 32], "trials": 4, "metrics": ["output_mse", "attention_tv", "kernel_mse"]}
JSON
start=$(date +%s)
(cd "$dir/work" && FAVOR=$favor timeout 600 sbatch --wait --array=0-3 --cpus-per-task=1 \
   "$root/scripts/slurm_sweep.sbatch" c.json out) || {
  sacct_state=$(squeue -h -o '%i %T %r' 2>/dev/null || true)
  echo "test_slurm: the job array failed [$sacct_state]" >&2; exit 1; }
echo "[test_slurm] array of 4 done in $(($(date +%s) - start)) s"
ls "$dir/work"/favor-*.log >/dev/null || { echo "test_slurm: no task logs" >&2; exit 1; }
"$favor" merge "$dir/work/merged" "$dir/work/out/shards/"* --quiet
"$favor" run "$dir/work/c.json" --out "$dir/work/single" --quiet
for f in errors.csv summary.csv; do
  cmp "$dir/work/single/$f" "$dir/work/merged/$f" || { echo "test_slurm: merged $f differs from a single run" >&2; exit 1; }
done
for k in 0 1 2 3; do
  grep -q "\"index\": $k" "$dir/work/out/shards/$k/run.json" && grep -q '"count": 4' "$dir/work/out/shards/$k/run.json" ||
    { echo "test_slurm: shard $k is not $k/4" >&2; exit 1; }
done
echo "test_slurm: ok (4 array tasks on a one-node Slurm $(sinfo -V | cut -d' ' -f2) cluster, merged = single run byte for byte)"
