#!/usr/bin/env bash
# make-home.sh TAG OUT: makes the fixture home OUT (testdata/home-TAG) with
# the ifaced of release TAG, built from its git tag. It runs two daemons of
# that release on loopback — "fixture" (the home kept) and "other" (a peer,
# thrown away) — and has the fixture greet the other, pin its key, name it
# with an alias, invoke its capabilities (answered by the example agent of
# the same release) and say something in the conversation, so that the
# store, the audit log and its signed checkpoints, and the key all hold
# data. README.md beside this script says how the fixture was made and
# what the test checks. Run from the repository root; it uses loopback only.
set -euo pipefail
tag=${1:?usage: make-home.sh TAG OUT}
out=${2:?usage: make-home.sh TAG OUT}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT

# The release, built in a clone at its tag (a clone, not a worktree: the go
# command stamps the tag as the version only where .git is a directory).
git clone --quiet --shared --no-checkout "$root" "$work/src"
git -C "$work/src" checkout --quiet --detach "refs/tags/$tag"
(cd "$work/src" && go build -buildvcs=true -o "$work/ifaced" ./cmd/ifaced &&
  go build -buildvcs=true -o "$work/agent" ./examples/agent/cmd/example-agent)
bin="$work/ifaced"
"$bin" version

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fport=$(port); oport=$(port); aport=$(port)
home="$work/fixture"; other="$work/other"
"$bin" init --home "$home" >/dev/null
"$bin" init --home "$other" >/dev/null
for h in "$home:$fport:fixture" "$other:$oport:other"; do
  IFS=: read -r dir p name <<<"$h"
  cat >"$dir/config.toml" <<TOML
version = 1

[identity]
display = "$name"

[listen]
addresses = ["/ip4/127.0.0.1/tcp/$p"]

[api]
listen = "127.0.0.1:0"

[discovery]
mdns = false
dht = "off"
gossip = false
TOML
done
cat >>"$other/config.toml" <<TOML

[agent]
webhook = "http://127.0.0.1:$aport/"
TOML
"$work/agent" --listen "127.0.0.1:$aport" --home "$other" --no-follow >"$work/agent.log" 2>&1 & pids+=($!)
"$bin" run --home "$home" >"$work/fixture.log" 2>&1 & pids+=($!)
"$bin" run --home "$other" >"$work/other.log" 2>&1 & pids+=($!)
for h in "$home" "$other"; do
  until "$bin" status --home "$h" >/dev/null 2>&1; do sleep 0.2; done
done
"$bin" caps add --home "$other" "$work/src/examples/agent/capabilities.toml"
OTHER=$("$bin" id --home "$other" --field peer_id)
"$bin" connect --home "$home" "/ip4/127.0.0.1/tcp/$oport/p2p/$OTHER"
"$bin" trust --home "$home" "$OTHER" --verify "$("$bin" id --home "$other" --field fingerprint)"
"$bin" alias --home "$home" other "$OTHER"
"$bin" greet --home "$home" other
"$bin" invoke --home "$home" other doc.summarize --params '{"text": "the fixture home of the previous release", "max_words": 3}'
"$bin" invoke --home "$home" other echo --params '{"text": "kept for the compat test"}'
"$bin" say --home "$home" other --phase context --text "a message kept in the fixture's audit log"
"$bin" audit verify --home "$home"
for p in "${pids[@]}"; do kill "$p"; done
wait 2>/dev/null || true
pids=()

# The home as the daemon left it, without what a run makes afresh (its
# control socket and API token).
rm -rf "$out"
mkdir -p "$out"
cp -R "$home/." "$out/"
rm -f "$out/api.sock" "$out/api.token"
printf '{"peer_id": "%s", "fingerprint": "%s", "other": "%s"}\n' "$("$bin" id --home "$home" --field peer_id)" \
  "$("$bin" id --home "$home" --field fingerprint)" "$OTHER" >"$out.json"
echo "made $out (other peer $OTHER)"
