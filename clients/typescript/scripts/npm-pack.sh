#!/usr/bin/env bash
# Packs sessiond the way codex and Claude Code ship native tools on npm:
# one package per platform holding the binary (os/cpu fields), a
# @sessiond/daemon package listing them as optional dependencies and
# exporting the binary's path, and @sessiond/client. Output: OUT (default
# build/npm) with the .tgz files; nothing is published.
# PLATFORMS: linux and darwin, each amd64 and arm64 (the darwin binaries
# are built and vetted here, not run: docs/operations.md "macOS").
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
ts="$repo/clients/typescript"
out="${OUT:-$repo/build/npm}"
version="$(node -p "require('$ts/package.json').version")"
platforms="${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}"
GO="${GO:-go}"
rm -rf "$out"
mkdir -p "$out/stage"
optional=""
for p in $platforms; do
	goos="${p%/*}"; goarch="${p#*/}"
	case "$goarch" in amd64) cpu=x64 ;; arm64) cpu=arm64 ;; *) cpu="$goarch" ;; esac
	name="daemon-$goos-$cpu"
	dir="$out/stage/$name"
	mkdir -p "$dir/bin"
	(cd "$repo" && CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" "$GO" build \
		-ldflags "-X github.com/sessiond/sessiond/internal/version.buildVersion=$version" -o "$dir/bin/sessiond" ./cmd/sessiond)
	cat > "$dir/package.json" <<JSON
{
  "name": "@sessiond/$name",
  "version": "$version",
  "description": "The sessiond daemon binary for $goos $cpu",
  "license": "MIT",
  "os": ["$goos"],
  "cpu": ["$cpu"],
  "files": ["bin"]
}
JSON
	optional="$optional${optional:+,}
    \"@sessiond/$name\": \"$version\""
done
dir="$out/stage/daemon"
mkdir -p "$dir"
cat > "$dir/package.json" <<JSON
{
  "name": "@sessiond/daemon",
  "version": "$version",
  "description": "The sessiond daemon: resolves the binary of this platform's package",
  "license": "MIT",
  "main": "index.js",
  "files": ["index.js"],
  "optionalDependencies": {$optional
  }
}
JSON
cat > "$dir/index.js" <<'JS'
"use strict";
// binaryPath() is the sessiond binary of the platform package npm
// installed for this os/cpu (an optional dependency of this package).
const path = require("node:path");
const cpu = { x64: "x64", arm64: "arm64" }[process.arch] || process.arch;
function binaryPath() {
  const pkg = `@sessiond/daemon-${process.platform}-${cpu}`;
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch (e) {
    throw new Error(`@sessiond/daemon: no binary for ${process.platform}/${process.arch} (${pkg} is not installed)`);
  }
  return path.join(dir, "bin", "sessiond");
}
module.exports = { binaryPath };
JS
for d in "$out"/stage/*; do
	(cd "$d" && npm pack --silent --pack-destination "$out" >/dev/null)
done
(cd "$ts" && npm run --silent build && npm pack --silent --pack-destination "$out" >/dev/null)
rm -rf "$out/stage"
ls "$out"
