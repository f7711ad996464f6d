#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the sweep tests in CI and
# for trying cmd/sweep's job arrays by hand.
#
#   scripts/slurm/cluster.sh start DIR   install slurm-wlm and munge with apt
#                                        when missing (as root), write
#                                        DIR/slurm.conf for this host and
#                                        start munged, slurmctld and slurmd
#   scripts/slurm/cluster.sh stop DIR    stop the daemons started for DIR
#   scripts/slurm/cluster.sh env DIR     print the export line that points
#                                        sbatch/squeue/scontrol at DIR
#
# start exits 3 (and prints why) when Slurm cannot be installed or started
# here, so that callers can skip with a clear message; any other failure
# exits 1. Every state, spool, pid and log file stays under DIR.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
	echo "usage: $0 start|stop|env DIR" >&2
	exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf="$dir/slurm.conf"

unavailable() { echo "slurm unavailable: $*" >&2; exit 3; }

install() {
	if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null; then
		return
	fi
	[ "$(id -u)" = 0 ] || unavailable "slurm-wlm and munge are not installed and installing them needs root"
	command -v apt-get >/dev/null || unavailable "slurm-wlm and munge are not installed and there is no apt-get"
	echo "installing slurm-wlm and munge with apt" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null 2>&1 || true
	apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 || unavailable "apt-get install slurm-wlm munge failed"
}

start_munge() {
	if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
		return # a munged already answers
	fi
	[ "$(id -u)" = 0 ] || unavailable "munged is not running and starting it needs root"
	if [ ! -s /etc/munge/munge.key ]; then
		mkdir -p /etc/munge
		dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
	fi
	chown munge:munge /etc/munge/munge.key 2>/dev/null || true
	chmod 400 /etc/munge/munge.key
	mkdir -p /run/munge /var/log/munge /var/lib/munge
	chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
	if id munge >/dev/null 2>&1; then
		runuser -u munge -- munged --force || munged --force
	else
		munged --force
	fi
	for _ in $(seq 50); do
		munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return
		sleep 0.1
	done
	unavailable "munged did not start"
}

write_conf() {
	local host cpus mem
	host=$(hostname -s)
	cpus=$(nproc)
	mem=$(awk '/MemTotal/ {print int($2/1024) - 512}' /proc/meminfo)
	mkdir -p "$dir/state" "$dir/spool" "$dir/log"
	cat >"$conf" <<CONF
# One-node cluster written by scripts/slurm/cluster.sh
ClusterName=proxgen
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=$((6817 + (RANDOM % 200) * 2))
SlurmdPort=$((7817 + (RANDOM % 200) * 2))
KillWait=30
MinJobAge=300
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
}

case "$cmd" in
start)
	install
	start_munge
	write_conf
	export SLURM_CONF="$conf"
	slurmctld -f "$conf" || unavailable "slurmctld did not start (see $dir/log/slurmctld.log)"
	slurmd -f "$conf" || unavailable "slurmd did not start (see $dir/log/slurmd.log)"
	for _ in $(seq 100); do
		if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
			echo "slurm: one-node cluster up (SLURM_CONF=$conf)" >&2
			exit 0
		fi
		sleep 0.2
	done
	unavailable "the node did not become idle (see $dir/log)"
	;;
stop)
	for d in slurmd slurmctld; do
		if [ -s "$dir/$d.pid" ]; then
			pid=$(cat "$dir/$d.pid")
			kill "$pid" 2>/dev/null || true
			for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -9 "$pid" 2>/dev/null || true
			rm -f "$dir/$d.pid"
		fi
	done
	;;
env)
	echo "export SLURM_CONF=$conf"
	;;
*)
	echo "usage: $0 start|stop|env DIR" >&2
	exit 2
	;;
esac
