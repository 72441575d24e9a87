#!/usr/bin/env bash
# check-fresh.sh: the README's set-up on a bare Debian 12, for release checks. Builds a clean
# bookworm root with debootstrap (minbase: nothing but the essential packages, no compiler, no make,
# no git) in an empty folder, does there what the README tells a new user to do (install git and make,
# clone the repository, `make run`, `make test`) and reports both results. Needs root (chroot) and
# Debian's debootstrap on the host; takes about half an hour on 2 cores.
#
#   scripts/check-fresh.sh [options] DIR
#     --host-ca      give the root this host's own certificate authorities (those under
#                    /usr/local/share/ca-certificates), for networks that re-sign TLS as a corporate
#                    proxy does; off by default
#     --mirror URL   the Debian mirror (default http://deb.debian.org/debian)
#     --rev REV      what to clone (default HEAD of the repository holding this script)
#     --keep         leave the root in DIR afterwards (it is removed by default)
#
# DIR must be empty or absent. Logs: DIR/debootstrap.log, DIR/make-run.log, DIR/make-test.log (kept).
set -euo pipefail

usage() { sed -n '/^#   scripts/,/^# DIR/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

args=("$@")
host_ca=no mirror=http://deb.debian.org/debian rev=HEAD keep=no dir=
while [ $# -gt 0 ]; do
    case "$1" in
    --host-ca) host_ca=yes ;;
    --mirror) [ $# -ge 2 ] || usage; mirror=$2; shift ;;
    --rev) [ $# -ge 2 ] || usage; rev=$2; shift ;;
    --keep) keep=yes ;;
    -h | --help) usage ;;
    -*) echo "check-fresh: unknown option '$1'" >&2; usage ;;
    *) [ -z "$dir" ] || usage; dir=$1 ;;
    esac
    shift
done
[ -n "$dir" ] || usage
# The root's mounts (proc, sys, dev, the source) are made in a private mount namespace of this
# script's own: nothing propagates to the host's /dev, and all of them go when the script ends.
if [ -z "${CHECK_FRESH_PRIVATE_MOUNTS:-}" ] && [ "$(id -u)" -eq 0 ]; then
    exec env CHECK_FRESH_PRIVATE_MOUNTS=1 unshare --mount --propagation private "$0" "${args[@]}"
fi
die() { echo "check-fresh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null || die "needs Debian's debootstrap on this host: apt-get install debootstrap"
if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then die "'$dir' is not empty"; fi

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse --verify "$rev^{commit}") || die "'$rev' is not a commit of $repo"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
root=$dir/root

mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
    if [ "$keep" = no ] && [ -d "$root" ]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT
bind() { # SOURCE TARGET [mount options...]: a mount inside the root, undone on exit
    local source=$1 target=$root$2
    shift 2
    mkdir -p "$target"
    mount "$@" "$source" "$target"
    mounted+=("$target")
}

step() { printf '%s  %s\n' "$(date -u +%H:%M:%S)" "$*"; }

step "debootstrap --variant=minbase bookworm $root ($mirror)"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$dir/debootstrap.log" 2>&1 ||
    die "debootstrap failed: see $dir/debootstrap.log"

bind proc /proc -t proc
bind sysfs /sys -t sysfs
bind /dev /dev --rbind
bind "$repo" /mnt/synapse-src --bind -o ro
cp /etc/resolv.conf "$root/etc/resolv.conf"
extra_env=()
if [ "$host_ca" = yes ]; then
    # ca-certificates, once installed in the root, bundles these into /etc/ssl/certs; Node is told to
    # read that bundle too.
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" 2>/dev/null ||
        die "--host-ca: no certificates under /usr/local/share/ca-certificates on this host"
    extra_env=(NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt)
fi

# in_root LOG COMMAND: COMMAND under bash in the root with a login's bare environment.
in_root() {
    local log=$1
    shift
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        TERM=dumb "${extra_env[@]}" /bin/bash -c "$*" >"$log" 2>&1
}

step "the README's prerequisites: apt-get install git make; git clone (at ${commit:0:12})"
in_root "$dir/prerequisites.log" "set -e; apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git make
    git clone -q /mnt/synapse-src /root/synapse; cd /root/synapse; git checkout -q $commit" ||
    die "installing git and make or cloning failed: see $dir/prerequisites.log"

status=0
start=$SECONDS
step "make run"
if in_root "$dir/make-run.log" "cd /root/synapse && make run"; then
    step "make run passed ($((SECONDS - start)) s)"
else
    status=1
    step "make run FAILED ($((SECONDS - start)) s): the end of $dir/make-run.log:"
    tail -n 20 "$dir/make-run.log"
fi

start=$SECONDS
step "make test"
if in_root "$dir/make-test.log" "cd /root/synapse && make test"; then
    step "make test passed ($((SECONDS - start)) s): $(tail -n 1 "$dir/make-test.log")"
else
    status=1
    step "make test FAILED ($((SECONDS - start)) s): the end of $dir/make-test.log:"
    tail -n 40 "$dir/make-test.log"
fi
exit $status
