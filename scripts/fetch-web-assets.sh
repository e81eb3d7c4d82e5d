#!/usr/bin/env bash
# Fetches Apache ECharts 6.1.0 from the npm registry into .deps/web: the one file `ortfleet report`
# inlines into every HTML report (echarts.min.js, with its LICENSE and NOTICE), so a report opens
# offline. The download is cached (ORTFLEET_CACHE, default ~/.cache/ortfleet) and checked against a
# pinned SHA-256.
# Usage: scripts/fetch-web-assets.sh
set -euo pipefail

PKG=echarts
VERSION=6.1.0
SHA256=681aff88cc1038c3fa941a3a53d1b177a52250b05335efc607d6105ae13be481

root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.deps/web"
cache="${ORTFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ortfleet}/npm"
tgz="$cache/$PKG-$VERSION.tgz"
stamp="$dest/.fetched-$PKG-$VERSION"

say() { echo "fetch-web-assets: $*" >&2; }

if [ -f "$stamp" ]; then say "ECharts $VERSION already in $dest"; exit 0; fi
# shellcheck source=lib/npm-fetch.sh
source "$root/scripts/lib/npm-fetch.sh"
tgz=$(npm_fetch "$PKG" "$VERSION" "$SHA256" "$cache")

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tar xzf "$tgz" -C "$tmp" package/dist/echarts.min.js package/LICENSE package/NOTICE
rm -rf "$dest" && mkdir -p "$dest"
cp "$tmp/package/dist/echarts.min.js" "$dest/echarts.min.js"
cp "$tmp/package/LICENSE" "$dest/ECHARTS-LICENSE"
cp "$tmp/package/NOTICE" "$dest/ECHARTS-NOTICE"
touch "$stamp"
say "ECharts $VERSION ready in $dest"
