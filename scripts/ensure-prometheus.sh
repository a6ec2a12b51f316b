#!/usr/bin/env bash
# Make `prometheus` and `promtool` available for the load-aware tests (tests/loadaware/test_prometheus.py).
#
# Already on PATH: nothing to do. Root on a Debian/Ubuntu machine: installs Debian's `prometheus` package
# (binaries only, no node-exporter; if the package starts its system service, it is stopped and disabled:
# the tests run their own Prometheus on a free loopback port). Otherwise: says how to install it, and the
# tests that need it skip. Never fails the build. Set KUBESCHED_NO_INSTALL=1 to only check.
set -u

have() { command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; }

if have; then
    echo "ensure-prometheus: $(prometheus --version 2>&1 | head -n1)"
    exit 0
fi

hint() {
    cat <<'MSG'
ensure-prometheus: prometheus/promtool not found; the Prometheus tests will be skipped.
  Debian/Ubuntu:  sudo apt-get install -y --no-install-recommends prometheus
  elsewhere:      put `prometheus` and `promtool` from https://prometheus.io/download/ on PATH
MSG
}

if [ "${KUBESCHED_NO_INSTALL:-}" = "1" ] || [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    hint
    exit 0
fi

echo "ensure-prometheus: installing Debian's prometheus package"
export DEBIAN_FRONTEND=noninteractive
install() { apt-get install -y -q --no-install-recommends prometheus >/dev/null; }
if ! install; then
    apt-get update -q >/dev/null && install
fi
if ! have; then
    echo "ensure-prometheus: the install did not work" >&2
    hint
    exit 0
fi
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    echo "ensure-prometheus: stopping and disabling the packaged prometheus service (the tests start their own)"
    systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
echo "ensure-prometheus: $(prometheus --version 2>&1 | head -n1)"
