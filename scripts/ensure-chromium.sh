#!/usr/bin/env bash
# Make Debian's `chromium` and `chromium-driver` available for the dashboard's browser tests
# (tests/dashboard/test_browser_e2e.py drives them through Selenium; Selenium's own browser downloads do not work
# offline).
#
# Already installed: nothing to do. Root on a Debian/Ubuntu machine: installs both packages. Otherwise: says how
# to install them, and the browser tests skip. Never fails the build. Set KUBESCHED_NO_INSTALL=1 to only check.
set -u

have() { command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; }

if have; then
    echo "ensure-chromium: $(chromium --version 2>/dev/null | head -n1)"
    exit 0
fi

hint() {
    cat <<'MSG'
ensure-chromium: chromium/chromedriver not found; the dashboard's browser tests will be skipped.
  Debian/Ubuntu:  sudo apt-get install -y chromium chromium-driver
  elsewhere:      put `chromium` and a matching `chromedriver` on PATH
MSG
}

if [ "${KUBESCHED_NO_INSTALL:-}" = "1" ] || [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    hint
    exit 0
fi

echo "ensure-chromium: installing Debian's chromium and chromium-driver packages"
export DEBIAN_FRONTEND=noninteractive
install() { apt-get install -y -q chromium chromium-driver >/dev/null; }
if ! install; then
    apt-get update -q >/dev/null && install
fi
if ! have; then
    echo "ensure-chromium: the install did not work" >&2
    hint
    exit 0
fi
echo "ensure-chromium: $(chromium --version 2>/dev/null | head -n1)"
