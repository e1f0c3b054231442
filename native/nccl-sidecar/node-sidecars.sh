#!/bin/bash
# One nccl-sidecar per device of the node, in one container that holds all the node's GPUs (the
# GPU overlay's DaemonSet): the ranks of one node are processes of one host, so NCCL connects
# them over NVLink/P2P and shared memory. Each sidecar serves CMESH_NCCL_SOCKET with {device}
# replaced by its index; its rank agent (the agent container's node mode, same settings) tells it
# which device to use.
#   CMESH_DEVICES      all (the /dev/nvidia<N> the container sees) or a count
#   CMESH_NCCL_SOCKET  e.g. /var/run/cmesh/nccl-{device}.sock
#   CMESH_NCCL_SIDECAR the sidecar binary (default: cmesh-nccl-sidecar on PATH)
# node-sidecars.sh [sidecar flags...]   runs them; when one exits, stops the others and exits with
#                                       its status, so the kubelet restarts the container
# node-sidecars.sh --check              exits 0 when every socket is there (the probes)
set -u
sidecar=${CMESH_NCCL_SIDECAR:-cmesh-nccl-sidecar}
template=${CMESH_NCCL_SOCKET:?CMESH_NCCL_SOCKET must name the sockets, one per device}
devices=${CMESH_DEVICES:-all}
if [ "$devices" = all ]; then
  devices=$(find /dev -maxdepth 1 -regex '/dev/nvidia[0-9]+' | wc -l)
fi
case "$devices" in
  '' | *[!0-9]* | 0) echo "node-sidecars: CMESH_DEVICES must be all or a count >= 1, got ${CMESH_DEVICES:-all} ($devices devices)" >&2; exit 2 ;;
esac
case "$template" in
  *'{device}'*) ;;
  *) [ "$devices" -gt 1 ] && { echo "node-sidecars: CMESH_NCCL_SOCKET $template: $devices sidecars cannot share one socket; put {device} in it" >&2; exit 2; } ;;
esac
placeholder='{device}'
socket() { printf '%s' "${template//"$placeholder"/$1}"; }

if [ "${1:-}" = --check ]; then
  for ((i = 0; i < devices; i++)); do [ -S "$(socket "$i")" ] || exit 1; done
  exit 0
fi

# sockets rw for the group (the agents' gid) even where the sidecars run as root (k8s/components/rdma)
umask 007
pids=()
stop() {
  trap - TERM INT
  kill -TERM "${pids[@]}" 2>/dev/null
  wait
}
trap 'stop; exit 0' TERM INT
for ((i = 0; i < devices; i++)); do
  "$sidecar" --socket "$(socket "$i")" "$@" &
  pids+=($!)
done
echo "node-sidecars: $devices sidecars (pids ${pids[*]}) on $(socket "{0..$((devices - 1))}")" >&2
# the first to exit ends the container: a missing sidecar leaves its rank without a GPU
wait -n
status=$?
echo "node-sidecars: a sidecar exited with status $status; stopping the others" >&2
stop
exit $((status == 0 ? 1 : status))
