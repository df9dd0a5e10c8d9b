#!/usr/bin/env bash
# demo.sh runs the infergate demo (`make demo`): bin/demo starts simserver
# and infergate, drives load through the proxy and prints a live p50/p99
# table. DEMO_SECONDS=N ends it after N seconds; otherwise Ctrl-C.
# Extra arguments go to bin/demo (e.g. -v, -rate-scale 0.5, -no-fault).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# `make demo` has built everything already; building the three binaries
# again is a cached no-op there and keeps a direct ./scripts/demo.sh run
# from using stale ones.
if command -v go >/dev/null 2>&1; then
	go build -o bin/ ./cmd/demo ./cmd/infergate ./examples/simserver
fi
for b in demo infergate simserver; do
	if [[ ! -x "bin/$b" ]]; then
		echo "demo.sh: bin/$b is missing: run 'make build' first" >&2
		exit 1
	fi
done
exec bin/demo -seconds "${DEMO_SECONDS:-0}" "$@"
