#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, to try and test `--profile profiles/slurm` for real:
# munge, MariaDB + slurmdbd (the accounting that sacct and the executor plugin's account checks read),
# slurmctld and slurmd on localhost with the node's real CPU count and memory, a GPU GRES declared
# (count only, no device file: it documents how a GPU node is described; jobs that ask for it are
# scheduled, one at a time, and find no GPU), one partition and an account that jobs must name.
#
#   sudo scripts/slurm_cluster.sh up     # install the Debian packages if missing, start, wait until the node is idle
#   scripts/slurm_cluster.sh status
#   sudo scripts/slurm_cluster.sh down   # stop the daemons this script started; state stays in $DLBENCH_SLURM_DIR
#
# Idempotent: `up` on a running cluster only checks it. Needs root (daemons, apt-get). It writes under
# $DLBENCH_SLURM_DIR (default /tmp/dlbench-slurm), MariaDB's database `dlbench_slurm_acct`, and links
# /etc/slurm/slurm.conf to its config: the client commands inside a job find the cluster only there, since the
# executor plugin's job step drops every SLURM_* variable, SLURM_CONF included. It refuses to run where
# /etc/slurm/slurm.conf is a real cluster's.
set -euo pipefail

DIR=${DLBENCH_SLURM_DIR:-/tmp/dlbench-slurm}
CLUSTER=dlbench
ACCOUNT=${DLBENCH_SLURM_ACCOUNT:-dlbench}
PARTITION=${DLBENCH_SLURM_PARTITION:-debug}
DATABASE=dlbench_slurm_acct
export SLURM_CONF=$DIR/etc/slurm.conf
SYSTEM_CONF=/etc/slurm/slurm.conf
NODE=$(hostname -s)
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)

log() { echo "slurm_cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }

install_packages() {
    local missing=()
    for package in "${PACKAGES[@]}"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return
    log "installing ${missing[*]} with apt-get"
    apt-get update -qq || die "apt-get update failed: the Debian package index is needed for ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
        || die "apt-get install ${missing[*]} failed"
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local seconds=$1 what=$2
    shift 2
    for _ in $(seq "$((seconds * 2))"); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    die "$what did not come up within ${seconds}s (logs: $DIR/log)"
}

write_config() {
    mkdir -p "$DIR"/{etc,log,spool/ctld,spool/d,run}
    local hardware memory
    # The node as slurmd measures it (CPUs, boards, sockets, cores, threads), less 1 GiB of memory for the system:
    # slurmd drains a node configured with more than it finds.
    hardware=$(slurmd -C | head -1 | sed -e 's/^NodeName=[^ ]* //' -e 's/ RealMemory=[0-9]*//')
    memory=$(( $(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p') - 1024 ))
    cat > "$SLURM_CONF" <<EOF
# Written by scripts/slurm_cluster.sh: a one-node cluster for testing the workflow's Slurm profile.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
# No cgroups inside a container: processes are tracked through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
# Finished jobs stay visible to squeue for a day, so that either status command of the plugin works.
MinJobAge=86400
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageEnforce=associations,limits
AccountingStorageTRES=gres/gpu
NodeName=$NODE NodeAddr=127.0.0.1 $hardware RealMemory=$memory Gres=gpu:1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    cat > "$DIR/etc/gres.conf" <<EOF
# One GPU, declared as a GPU node declares it. Slurm's gres/gpu needs a device file; /dev/null stands in (with
# task/none nothing is bound to a job; Slurm sets CUDA_VISIBLE_DEVICES=0 in it, which names no device here).
NodeName=$NODE Name=gpu File=/dev/null
EOF
    cat > "$DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=$NODE
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=$DATABASE
StorageUser=root
EOF
    chmod 600 "$DIR/etc/slurmdbd.conf"
}

link_system_config() {
    if [ -e "$SYSTEM_CONF" ] && [ "$(readlink "$SYSTEM_CONF")" != "$SLURM_CONF" ]; then
        die "$SYSTEM_CONF exists and is not this script's: this machine has a Slurm configuration of its own"
    fi
    mkdir -p "$(dirname "$SYSTEM_CONF")"
    ln -sfn "$SLURM_CONF" "$SYSTEM_CONF"
}

start_munge() {
    pgrep -x munged >/dev/null && return
    [ -s /etc/munge/munge.key ] || { mungekey --create --keyfile /etc/munge/munge.key && chown munge: /etc/munge/munge.key; }
    mkdir -p /run/munge && chown munge: /run/munge
    runuser -u munge -- /usr/sbin/munged
    wait_for 10 munge munge -n
}

start_mariadb() {
    if ! mysqladmin ping >/dev/null 2>&1; then
        mkdir -p /run/mysqld && chown mysql: /run/mysqld
        (setsid mysqld_safe --user=mysql >"$DIR/log/mariadb.log" 2>&1 &)
        wait_for 60 MariaDB mysqladmin ping
    fi
    # slurmdbd connects as MariaDB's root over the local socket (Debian's unix_socket authentication).
    mysql -e "CREATE DATABASE IF NOT EXISTS $DATABASE"
}

running() { [ -s "$DIR/run/$1.pid" ] && kill -0 "$(cat "$DIR/run/$1.pid")" 2>/dev/null; }

start_slurm() {
    running slurmdbd || slurmdbd
    wait_for 30 slurmdbd sacctmgr -n list cluster
    # The cluster, an account and root's association, before slurmctld registers (-i: no prompt).
    sacctmgr -n list cluster format=cluster | grep -qw "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
    sacctmgr -n list account format=account | grep -qw "$ACCOUNT" \
        || sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="dlbench test account" >/dev/null
    sacctmgr -n list assoc user=root account="$ACCOUNT" format=account | grep -qw "$ACCOUNT" \
        || sacctmgr -i add user root Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null
    running slurmctld || slurmctld
    wait_for 30 slurmctld scontrol ping
    running slurmd || slurmd
    wait_for 30 "slurmd registration" sh -c "sinfo -h -n $NODE -o %t | grep -qvE '^(unk|down)'"
    # A drain saved from an earlier configuration (e.g. another GRES count) outlives a restart: lift it.
    if sinfo -h -n "$NODE" -o %t | grep -q '^drain'; then
        scontrol update NodeName="$NODE" State=RESUME
    fi
    wait_for 60 "node $NODE" sh -c "sinfo -h -n $NODE -o %t | grep -qE '^(idle|mix|alloc)'"
}

up() {
    [ "$(id -u)" -eq 0 ] || die "run as root: it starts munged, MariaDB and the Slurm daemons"
    install_packages
    link_system_config
    write_config
    start_munge
    start_mariadb
    start_slurm
    log "cluster $CLUSTER up: node $NODE ($(sinfo -h -n "$NODE" -o '%c CPUs, %m MB, %G')), partition $PARTITION, account $ACCOUNT"
}

down() {
    for daemon in slurmd slurmctld slurmdbd; do
        if running "$daemon"; then
            kill "$(cat "$DIR/run/$daemon.pid")"
            log "stopped $daemon"
        fi
    done
    [ "$(readlink "$SYSTEM_CONF" 2>/dev/null)" = "$SLURM_CONF" ] && rm "$SYSTEM_CONF"
    # munged and MariaDB may serve others; they are left running.
}

status() {
    for daemon in slurmdbd slurmctld slurmd; do
        if running "$daemon"; then echo "$daemon: running"; else echo "$daemon: stopped"; fi
    done
    running slurmctld && sinfo -N -o "%N %t %c CPUs %m MB %G %P"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    *) die "usage: $0 up|down|status" ;;
esac
