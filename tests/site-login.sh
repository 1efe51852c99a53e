#!/usr/bin/env bash
# The site's admin on a test-world host container, as docs/operations.md ("Logging in") asks of a site: the control
# node's key, the login user `ops` with that key in its authorized_keys, the sudoers line
# `ops ALL=(root) NOPASSWD: ALL` (/etc/sudoers.d/ops) and the host's own host key in a known_hosts file of the
# control node (read on the host itself: no other key is accepted). Each step finds what is done and keeps it.
# Used by tests/simulate and molecule serve's prepare (both then reach the host over SSH as ops, root through sudo).
# Usage: bash tests/site-login.sh CONTAINER ADDRESS SSH_DIR
#   writes SSH_DIR/id_ed25519 (made once, 0600) and SSH_DIR/known_hosts-CONTAINER (ADDRESS and the host key, 0600)
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: bash tests/site-login.sh CONTAINER ADDRESS SSH_DIR" >&2; exit 2; }
name=$1 address=$2 ssh_dir=$3
install -d -m 0700 "$ssh_dir"
if [ ! -f "$ssh_dir/id_ed25519" ]; then
  ssh-keygen -q -t ed25519 -N "" -C "airgap-vllm test control node" -f "$ssh_dir/id_ed25519"
fi
chmod 0600 "$ssh_dir/id_ed25519"
pub=$(cat "$ssh_dir/id_ed25519.pub")
# shellcheck disable=SC2016
docker exec -e "PUB=$pub" "$name" sh -euc '
  id ops >/dev/null 2>&1 || useradd -m -s /bin/bash ops
  install -d -m 0700 -o ops -g ops ~ops/.ssh
  grep -qxF "$PUB" ~ops/.ssh/authorized_keys 2>/dev/null || printf "%s\n" "$PUB" >>~ops/.ssh/authorized_keys
  chown ops:ops ~ops/.ssh/authorized_keys && chmod 0600 ~ops/.ssh/authorized_keys
  line="ops ALL=(root) NOPASSWD: ALL"
  if ! grep -qxF "$line" /etc/sudoers.d/ops 2>/dev/null; then
    printf "%s\n" "$line" >/etc/sudoers.d/ops.new && chmod 0440 /etc/sudoers.d/ops.new
    visudo -cqf /etc/sudoers.d/ops.new && mv /etc/sudoers.d/ops.new /etc/sudoers.d/ops
  fi'
# sshd makes its host keys when it first starts (a few seconds on a fresh host).
hostkey=""
for _ in $(seq 60); do
  hostkey=$(docker exec "$name" cat /etc/ssh/ssh_host_ed25519_key.pub 2>/dev/null | cut -d" " -f1,2) || true
  [ -n "$hostkey" ] && docker exec "$name" systemctl -q is-active ssh.service && break
  hostkey=""
  sleep 1
done
if [ -z "$hostkey" ]; then
  echo "sshd did not start on $name: docker exec $name systemctl status ssh" >&2
  exit 1
fi
printf '%s %s\n' "$address" "$hostkey" >"$ssh_dir/known_hosts-$name"
chmod 0600 "$ssh_dir/known_hosts-$name"
