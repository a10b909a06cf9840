#!/usr/bin/env bash
# A container engine for the test suite (`nox -s tests` calls it; so does anyone who
# wants one for a run of their own):
#
#   scripts/engine.sh start      prints KEY=VALUE lines for the run's environment:
#                                DOCKER_HOST, VPR_ENGINE_PID, VPR_ENGINE_DIR and
#                                VPR_REQUIRE_ENGINE=1 (the container tests may not skip)
#   scripts/engine.sh stop PID DIR
#
# Where an engine is already reachable (DOCKER_HOST, /var/run/docker.sock) it prints
# nothing and the tests use that one. Where none is and this runs as root with apt,
# Debian's podman (runc runtime) and mmdebstrap are installed and podman's
# Docker-compatible API is served on a private socket until `stop`. Elsewhere it says why
# on stderr and prints nothing: the container tests then skip, saying why.
set -euo pipefail

start() {
    if [ -n "${DOCKER_HOST:-}" ] || [ -S /var/run/docker.sock ]; then
        echo "engine: one is reachable already (${DOCKER_HOST:-/var/run/docker.sock})" >&2
        return 0
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "engine: no container engine and no root apt here: the container tests will skip" >&2
        return 0
    fi
    if ! command -v podman >/dev/null || ! command -v mmdebstrap >/dev/null \
        || ! command -v runc >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap >/dev/null
    fi
    if [ ! -f /etc/containers/containers.conf ]; then
        # crun fails on hybrid cgroups; runc needs ulimits below the host's nproc.
        mkdir -p /etc/containers
        cat >/etc/containers/containers.conf <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]

[engine]
runtime = "runc"
EOF
    fi
    local dir pid
    dir="$(mktemp -d /run/vpr-podman.XXXXXX)"
    # its own session: the caller's Ctrl-C reaches it through `stop`, once, at the end
    setsid podman system service --time=0 "unix://$dir/podman.sock" </dev/null >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do
        [ -S "$dir/podman.sock" ] && break
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "engine: podman system service ended: $(tail -3 "$dir/log")" >&2
            rm -rf "$dir"
            return 0
        fi
        sleep 0.2
    done
    if [ ! -S "$dir/podman.sock" ]; then
        echo "engine: podman's socket did not appear in 20 s; stopping it" >&2
        stop "$pid" "$dir"
        return 0
    fi
    echo "engine: podman API at unix://$dir/podman.sock (pid $pid), stopped at the end" >&2
    echo "DOCKER_HOST=unix://$dir/podman.sock"
    echo "VPR_ENGINE_PID=$pid"
    echo "VPR_ENGINE_DIR=$dir"
    echo "VPR_REQUIRE_ENGINE=1"
}

stop() {
    local pid="${1:-}" dir="${2:-}"
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    case "$dir" in
        /run/vpr-podman.*) rm -rf "$dir" ;;
        "") ;;
        *) echo "engine: not removing $dir (not one of ours)" >&2 ;;
    esac
}

case "${1:-}" in
    start) start ;;
    stop) shift; stop "$@" ;;
    *) echo "usage: scripts/engine.sh start | stop PID DIR" >&2; exit 2 ;;
esac
