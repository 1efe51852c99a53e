#!/usr/bin/env bash
# The served host: a snapshot of the simulated Kylin host as molecule serve leaves it (site.yml converged, the real
# CPU engine serving behind the front door), so that the scenarios of day 2 (molecule day2, release, front,
# observe, uninstall) each start from a served host of their own without converging one (issue 40).
#
# A snapshot is three parts (each written to a temporary folder and renamed when whole; the `complete` mark last: a
# cut save leaves no snapshot):
#   image   the host container committed as $SERVED_IMAGE (its root file system: the driver, the units, the staged
#           bundle, the models, our records), labelled with the hash;
#   docker  the host's /var/lib/docker (an anonymous volume, not part of a commit): the images and containers of the
#           host's own Docker, taken with the host stopped, kept in <Docker's root>/airgap-test-served/<hash> (the
#           volumes' own file system: hard links cannot cross a mount point, and the volumes' folder often is one);
#   control the control node's side under $AIRGAP_TEST_CACHE/served/<hash>/control: its SSH key, the site CA and the
#           reports (ssh/, pki/, reports/ of the scenario's ephemeral folder) and the bundle (bundle/, read-only,
#           shared by link: nothing writes to a built bundle).
# Taken by hard links (the host's volume and bundle are never used again: molecule destroys them next); restored by
# copying, except the image layers' folders, which Docker never writes to (overlayfs' lower layers) and only ever
# removes: those are hard links again, so a restore copies the containers' own layers and Docker's databases only.
#
# The hash is of what the converged host is made of apart from the collection's own code: the world's images, the
# simulated inventory, the bundle settings, the login script, molecule serve and this script. The roles and modules
# are left out on purpose: each scenario's prepare runs site.yml once on the restored host, so it serves the
# current code (as a site does after upgrading the collection), and molecule serve proves the bare converge.
#
# Usage: bash tests/world/served.sh hash
#        bash tests/world/served.sh have                       (exit 0 when the snapshot of this hash is whole)
#        bash tests/world/served.sh save CONTAINER EPHEMERAL   (molecule serve, at its end; no-op when it is there)
#        bash tests/world/served.sh restore CONTAINER EPHEMERAL
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${AIRGAP_TEST_CACHE:-/var/cache/airgap-test}
SERVED_IMAGE=airgap-test/kylin-served:v10sp3
LABEL=org.airgap-test.served-hash
# The world's images the converged host holds or was made from (tests/world/build.sh).
WORLD_IMAGES="airgap-test/kylin:v10sp3 vllm/vllm-openai:v0.27.1 haproxy:2.6"

log() { printf '[served.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

served_hash() {
  {
    local i
    for i in $WORLD_IMAGES; do printf '%s %s\n' "$i" "$(docker image inspect -f '{{.Id}}' "$i" 2>/dev/null || echo absent)"; done
    # What shapes the served host: molecule serve's platform, prepare and converge (not its checks: verify, tests/,
    # side_effect change nothing on the host), the inventory, the bundle's settings, the login and this script.
    (cd "$REPO" && find inventories/simulated molecule/serve/molecule.yml molecule/serve/hosts molecule/serve/prepare.yml \
      molecule/serve/converge.yml tests/world/bundle-vars.yml tests/site-login.sh tests/world/served.sh -type f -print0 \
      | LC_ALL=C sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -c1-16
}

dir_of() { echo "$CACHE/served/$1"; }
docker_dir_of() { echo "$(docker info -f '{{.DockerRootDir}}')/airgap-test-served/$1"; }

have() { # HASH
  local d
  d=$(dir_of "$1")
  [[ -f $d/complete && -d $(docker_dir_of "$1") ]] \
    && [[ $(docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$SERVED_IMAGE" 2>/dev/null) == "$1" ]]
}

# cp that reports its first errors only (a failed cp of thousands of files would print a line for each).
copy() { # CP-ARGS...
  local err
  err=$(mktemp)
  if ! cp "$@" 2>"$err"; then
    echo "served.sh: cp $* failed:" >&2; head -n 5 "$err" >&2; rm -f "$err"; exit 1
  fi
  rm -f "$err"
}

# Stop a systemd container as its own poweroff does (systemd halts on SIGRTMIN+3; SIGTERM it ignores).
halt() { # CONTAINER
  docker kill --signal SIGRTMIN+3 "$1" >/dev/null 2>&1 || true
  timeout 120 docker wait "$1" >/dev/null 2>&1 || docker kill "$1" >/dev/null 2>&1 || true
}

volume_of() { # CONTAINER -> the host path of its /var/lib/docker
  docker inspect -f '{{range .Mounts}}{{if eq .Destination "/var/lib/docker"}}{{.Source}}{{end}}{{end}}' "$1"
}

save() { # CONTAINER EPHEMERAL
  local c=$1 eph=$2 h d dd tmp dtmp src part
  h=$(served_hash)
  if have "$h"; then log "served host $h is there already"; return 0; fi
  d=$(dir_of "$h"); tmp="$d.tmp.$$"
  dd=$(docker_dir_of "$h"); dtmp="$dd.tmp.$$"
  src=$(volume_of "$c")
  [[ -n $src && -d $src ]] || { echo "served.sh: $c has no /var/lib/docker volume" >&2; exit 1; }
  rm -rf "$tmp" "$dtmp" && mkdir -p "$tmp/control" "$(dirname "$dtmp")"
  log "stopping $c (its systemd stops the engine and its Docker cleanly)"
  halt "$c"
  log "committing $c as $SERVED_IMAGE ($h)"
  docker commit --change "LABEL $LABEL=$h" --change 'CMD ["/lib/systemd/systemd"]' "$c" "$SERVED_IMAGE" >/dev/null
  log "keeping its Docker data ($(du -sh "$src" | cut -f1), linked)"
  copy -al "$src" "$dtmp"
  for part in ssh pki reports; do
    if [[ -d $eph/$part ]]; then copy -a "$eph/$part" "$tmp/control/$part"; fi
  done
  copy -al "$eph/bundle" "$tmp/control/bundle"
  # Older snapshots: only the one the image holds is of use.
  find "$CACHE/served" "$(dirname "$dd")" -mindepth 1 -maxdepth 1 ! -name "$h" ! -name "*.tmp.$$" -exec rm -rf {} +
  rm -rf "$dd" "$d" && mv "$dtmp" "$dd" && mv "$tmp" "$d"
  touch "$d/complete"
  log "served host $h saved in $d and $dd"
}

restore() { # CONTAINER EPHEMERAL
  local c=$1 eph=$2 h d dst part
  h=$(served_hash)
  if ! have "$h"; then
    echo "served.sh: no served host for this world ($h): run \`molecule test -s serve\` first (tests/prove and" \
      "tests/run-all do)" >&2
    exit 1
  fi
  d=$(dir_of "$h"); dd=$(docker_dir_of "$h")
  dst=$(volume_of "$c")
  [[ -n $dst && -d $dst ]] || { echo "served.sh: $c has no /var/lib/docker volume" >&2; exit 1; }
  log "restoring served host $h into $c"
  # The host stopped while its Docker data is put back; started again it boots as a served host does after a power
  # cycle (docker, the engine's unit, the front door's unit).
  halt "$c"
  find "$dst" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
  # The containers' own layers (read-write, and their init layers) are copied; every other layer is an image's.
  local rw=" " id f
  for f in "$dd"/image/overlay2/layerdb/mounts/*/mount-id "$dd"/image/overlay2/layerdb/mounts/*/init-id; do
    [[ -f $f ]] && rw+="$(cat "$f") "
  done
  mkdir -p "$dst/overlay2"
  for f in "$dd"/*; do
    [[ $(basename "$f") == overlay2 ]] || copy -a "$f" "$dst/"
  done
  for f in "$dd"/overlay2/*; do
    id=$(basename "$f")
    if [[ $id == l || $rw == *" $id "* ]]; then copy -a "$f" "$dst/overlay2/"; else copy -al "$f" "$dst/overlay2/"; fi
  done
  mkdir -p "$eph"
  for part in ssh pki reports; do
    rm -rf "${eph:?}/$part"
    [[ -d $d/control/$part ]] && cp -a "$d/control/$part" "$eph/$part"
  done
  rm -rf "$eph/bundle" && ln -s "$d/control/bundle" "$eph/bundle"
  docker start "$c" >/dev/null
}

case ${1:-} in
  hash) served_hash ;;
  have) have "$(served_hash)" ;;
  save) [[ $# -eq 3 ]] || { echo "usage: served.sh save CONTAINER EPHEMERAL" >&2; exit 2; }; save "$2" "$3" ;;
  restore) [[ $# -eq 3 ]] || { echo "usage: served.sh restore CONTAINER EPHEMERAL" >&2; exit 2; }; restore "$2" "$3" ;;
  *) sed -n '2,23p' "$0" >&2; exit 2 ;;
esac
