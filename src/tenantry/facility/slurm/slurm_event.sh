#!/bin/sh
# Tenantry: tell the facility service that a job started or ended, so that its poller of
# Slurm can slow down to a safety net (docs/facility-cluster.md, "Job events from slurmctld").
#
# slurm.conf, on the controller (the script runs there as SlurmUser):
#   PrologSlurmctld=/etc/slurm/tenantry-slurm-event      a job starts
#   EpilogSlurmctld=/etc/slurm/tenantry-slurm-event      a job ended (its exit code and signal;
#                                                        the service asks accounting its state)
# or, for the end, JobCompType=jobcomp/script with JobCompLoc= this script (the final state
# itself; jobcomp/script runs its script in /tmp, which SlurmUser must be able to enter).
#
# It appends one line to the event log, which only SlurmUser can write and the facility
# service reads (and trusts only while SlurmUser or root owns it and no one else may write
# it). It never fails the job and never waits: it always exits 0.
umask 022
log=${TENANTRY_SLURM_EVENT_LOG:-/var/spool/tenantry-slurm/events}
now=$(date +%s.%N 2>/dev/null) || now=0
if [ "${SLURM_SCRIPT_CONTEXT:-}" = prolog_slurmctld ]; then
	array=""
	if [ -n "${SLURM_ARRAY_JOB_ID:-}" ] && [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
		array="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
	fi
	line="v1 $now start job=${SLURM_JOB_ID:-} array=$array user=${SLURM_JOB_USER:-} state=RUNNING exit= nodes=${SLURM_JOB_NODELIST:-} partition=${SLURM_JOB_PARTITION:-} account=${SLURM_JOB_ACCOUNT:-}"
elif [ "${SLURM_SCRIPT_CONTEXT:-}" = epilog_slurmctld ]; then
	array=""
	if [ -n "${SLURM_ARRAY_JOB_ID:-}" ] && [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
		array="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
	fi
	line="v1 $now end job=${SLURM_JOB_ID:-} array=$array user=${SLURM_JOB_USER:-} state=ENDED exit=${SLURM_JOB_EXIT_CODE2:-} nodes=${SLURM_JOB_NODELIST:-} partition=${SLURM_JOB_PARTITION:-} account=${SLURM_JOB_ACCOUNT:-}"
elif [ -n "${JOBSTATE:-}" ] && [ -n "${JOBID:-}" ]; then
	array=""
	case "${ARRAYJOBID:-0}:${ARRAYTASKID:-}" in
	0:* | *:4294967294 | *:) ;;
	*) array="${ARRAYJOBID}_${ARRAYTASKID}" ;;
	esac
	line="v1 $now end job=$JOBID array=$array user=${USERNAME:-} state=$JOBSTATE exit=${EXITCODE:-} nodes=${NODES:-} partition=${PARTITION:-} account=${ACCOUNT:-}"
else
	exit 0
fi
# one short line in one write(2) with O_APPEND: concurrent runs do not interleave
{ printf '%s\n' "$line"; } 2>/dev/null >>"$log"
exit 0
