#!/usr/bin/env bash
# Headless-browser screenshot of a built book page, to check that its tables fit (no clipped
# text, no NaN, integers printed as integers). Needs Chromium (Debian: apt-get install
# chromium); the flags keep it off the network.
#
#   bash scripts/screenshot.sh [PAGE] [OUT.png] [HEIGHT]
#   bash scripts/screenshot.sh book/notebooks/status /tmp/status.png   # the default
set -euo pipefail
cd "$(dirname "$0")/.."
page=${1:-book/notebooks/status}
out=${2:-_build/screenshots/$(basename "$page").png}
height=${3:-2200}
html=_build/html/$page.html
[[ -f $html ]] || { echo "no $html: run make book first" >&2; exit 1; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[[ -n $browser ]] || { echo "no Chromium found (apt-get install chromium)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size=1280,"$height" \
  --screenshot="$out" "file://$PWD/$html" 2>/dev/null
echo "wrote $out"
