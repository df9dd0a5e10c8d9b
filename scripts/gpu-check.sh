#!/usr/bin/env bash
# gpu-check.sh: check infergate's NVML source on a real GPU, in under five
# minutes. It builds infergate with NVML (cgo), starts it with
# --gpu-source nvml, reads the GPU gauges on /metrics and /api/v1/gpus,
# compares them with nvidia-smi, runs a small GPU load when PyTorch (or
# CuPy) is at hand and checks that utilisation follows, and prints PASS or
# FAIL per check.
#
# Exit status: 0 all checks passed; 1 a check failed; 2 no NVIDIA driver on
# this machine (nothing GPU-side could be checked: the script says so and
# checks only that infergate runs without NVML, as it must).
#
# Environment: INFERGATE=path uses that binary instead of building one;
# GPU_CHECK_LOAD_SECONDS (default 20) is how long the load runs.
set -uo pipefail

cd "$(dirname "$0")/.."
work=$(mktemp -d)
pid=""
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

failed=0
pass() { printf 'PASS  %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; failed=1; }
info() { printf '      %s\n' "$*"; }

# The driver: NVML is libnvidia-ml.so.1, which go-nvml loads at run time.
driver=yes
if ! { ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; } && ! command -v nvidia-smi >/dev/null 2>&1; then
	driver=no
fi

bin=${INFERGATE:-}
if [ -z "$bin" ]; then
	bin=$work/infergate
	if ! CGO_ENABLED=1 go build -o "$bin" ./cmd/infergate; then
		fail "build infergate with cgo (NVML)"
		exit 1
	fi
	pass "built infergate with NVML (cgo)"
fi

# infergate needs an upstream address, not a live one, to start.
"$bin" --listen 127.0.0.1:0 --admin 127.0.0.1:0 --upstream 127.0.0.1:9 \
	--gpu-source nvml --gpu-interval 1s --log-level info 2>"$work/log" &
pid=$!
admin=""
for _ in $(seq 1 100); do
	admin=$(sed -n 's/.*infergate: grpc=[^ ]* admin=\([^ ]*\).*/\1/p' "$work/log" | head -1)
	[ -n "$admin" ] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$admin" ]; then
	fail "infergate did not start; its log:"
	sed 's/^/      /' "$work/log"
	exit 1
fi
pass "infergate started with --gpu-source nvml (admin $admin)"
# metrics is read whole before grep looks at it: grep -q stops at its
# match, and with pipefail curl's write error on the closed pipe would
# fail the check (seen once /metrics grew past a pipe buffer).
metrics() { local m; m=$(curl -fsS "http://$admin/metrics") && printf '%s\n' "$m"; }
has_metric() { grep -q "$1" <<<"$(metrics)"; }
gpus() { curl -fsS "http://$admin/api/v1/gpus"; }
sleep 2.5 # two samples

if [ "$driver" = no ]; then
	if has_metric '^infergate_gpu_source_up{source="nvml"} 0'; then
		pass "without a driver the nvml source reports down and the proxy keeps running"
	else
		fail "without a driver: infergate_gpu_source_up{source=\"nvml\"} is not 0"
	fi
	echo "RESULT: no NVIDIA driver on this machine (libnvidia-ml.so.1 not found): the GPU checks did not run"
	exit 2
fi

# From here a driver is present.
if has_metric '^infergate_gpu_source_up{source="nvml"} 1'; then
	pass "nvml source up"
else
	fail "nvml source not up; /api/v1/gpus says: $(gpus | head -c 400)"
fi
want=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
got=$(gpus | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["gpus"]))' 2>/dev/null || echo 0)
if [ "$got" = "$want" ] && [ "$got" -gt 0 ]; then
	pass "GPUs: $got in /api/v1/gpus, $want in nvidia-smi -L"
else
	fail "GPUs: $got in /api/v1/gpus, $want in nvidia-smi -L"
fi
for g in infergate_gpu_utilization_ratio infergate_gpu_memory_used_bytes infergate_gpu_memory_total_bytes \
	infergate_gpu_temperature_celsius infergate_gpu_power_watts infergate_gpu_sm_clock_hertz infergate_gpu_throttled; do
	n=$(metrics | grep -c "^$g{")
	if [ "$n" -ge "$want" ]; then pass "$g: $n series"; else fail "$g: $n series for $want GPUs"; fi
done
# Memory total as NVML says through infergate and as nvidia-smi says (MiB).
smi=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -d ' ')
ig=$(gpus | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["gpus"][0]["memory_total_bytes"]) >> 20)' 2>/dev/null || echo 0)
if [ -n "$smi" ] && [ "$ig" -gt 0 ] && [ $((ig > smi ? ig - smi : smi - ig)) -le 1 ]; then
	pass "GPU 0 memory total: $ig MiB (nvidia-smi $smi MiB)"
else
	fail "GPU 0 memory total: $ig MiB via infergate, $smi MiB via nvidia-smi"
fi
gpus | python3 -m json.tool | head -40 | sed 's/^/      /'

# A small load, if a GPU library is at hand: utilisation must follow.
secs=${GPU_CHECK_LOAD_SECONDS:-20}
load=""
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	load="import torch,time; a=torch.randn(8192,8192,device='cuda'); t=time.time()
while time.time()-t<$secs: a=a@a; a/=a.norm(); torch.cuda.synchronize()"
elif python3 -c 'import cupy' 2>/dev/null; then
	load="import cupy,time; a=cupy.random.rand(8192,8192,dtype=cupy.float32); t=time.time()
while time.time()-t<$secs: a=a@a; a/=cupy.linalg.norm(a); cupy.cuda.Device().synchronize()"
fi
if [ -z "$load" ]; then
	info "no PyTorch or CuPy here: utilisation under load not checked"
else
	python3 -c "$load" &
	lp=$!
	peak=0
	for _ in $(seq 1 "$secs"); do
		sleep 1
		u=$(metrics | sed -n 's/^infergate_gpu_utilization_ratio{[^}]*gpu_uuid="[^"]*"[^}]*} \(.*\)/\1/p' | sort -g | tail -1)
		peak=$(python3 -c "print(max($peak, ${u:-0}))")
	done
	wait "$lp"
	if python3 -c "import sys; sys.exit(0 if $peak >= 0.5 else 1)"; then
		pass "under load utilisation reached $peak"
	else
		fail "under load utilisation peaked at $peak (want >= 0.5)"
	fi
fi

if [ "$failed" = 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
exit "$failed"
