#!/usr/bin/env bash
# Make `etcd` available for the etcd storage backend and its tests (tests/cluster/test_storage_conformance.py,
# tests/cluster/test_durable_*.py with --storage etcd).
#
# Already on PATH: nothing to do. Root on a Debian/Ubuntu machine: installs Debian's `etcd-server` package
# (if the package starts its system service, it is stopped and disabled: kubesched starts its own etcd on a
# free loopback port under the cluster's data dir). Otherwise: says how to install it, and the tests that need
# it skip. Never fails the build. Set KUBESCHED_NO_INSTALL=1 to only check.
set -u

have() { command -v etcd >/dev/null 2>&1; }

if have; then
    echo "ensure-etcd: $(etcd --version 2>&1 | head -n1)"
    exit 0
fi

hint() {
    cat <<'MSG'
ensure-etcd: etcd not found; the etcd storage tests will be skipped.
  Debian/Ubuntu:  sudo apt-get install -y --no-install-recommends etcd-server
  elsewhere:      put `etcd` from https://github.com/etcd-io/etcd/releases on PATH
MSG
}

if [ "${KUBESCHED_NO_INSTALL:-}" = "1" ] || [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    hint
    exit 0
fi

echo "ensure-etcd: installing Debian's etcd-server package"
export DEBIAN_FRONTEND=noninteractive
install() { apt-get install -y -q --no-install-recommends etcd-server >/dev/null; }
if ! install; then
    apt-get update -q >/dev/null && install
fi
if ! have; then
    echo "ensure-etcd: the install did not work" >&2
    hint
    exit 0
fi
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
    echo "ensure-etcd: stopping and disabling the packaged etcd service (kubesched starts its own)"
    systemctl disable --now etcd >/dev/null 2>&1 || true
fi
echo "ensure-etcd: $(etcd --version 2>&1 | head -n1)"
