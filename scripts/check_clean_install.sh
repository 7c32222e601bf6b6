#!/usr/bin/env bash
# Proves the README's set-up on a bare Debian 12: builds a minimal bookworm
# (debootstrap --variant=minbase, from the mirror in this machine's own apt
# sources), copies the committed tree (git archive HEAD) into it with nothing
# beside it, as a user's clone has nothing beside it, and inside a chroot
# runs scripts/setup.sh for the main job's target, then a 10-step `tiny`
# training that must write weights/step_10.gguf, then the tests that read
# the committed fixtures (tests/fixtures: the float64 reference states,
# llama.cpp's logits, the GGUF fixtures, their checksums) and the lint that
# no file points outside the tree.
#
#   bash scripts/check_clean_install.sh
#
# Nothing installed on this machine can leak in: the chroot sees only the
# bare base and what setup.sh installs there. The base is cached as a
# tarball under build/clean-install/ (debootstrap is the slow part) and each
# check unpacks it afresh, so no check starts from a previous check's
# packages. Needs root (debootstrap, mount, chroot).
#
# Kept between checks, outside the checkout (CI clones afresh each time) in
# ~/.cache/ggtrain (GGTRAIN_CACHE_DIR): the bare base's tarball, and the
# .deb files apt downloads inside the chroot. apt still reads today's
# package lists and checks every cached .deb against them, then installs
# each one into the fresh root, so the check proves the same set-up; it only
# does not fetch the same bytes twice.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT_DIR=$PWD
WORK=${GGTRAIN_CLEAN_INSTALL_DIR:-$ROOT_DIR/build/clean-install}
CACHE=${GGTRAIN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ggtrain}/clean-install
BASE_TAR=$CACHE/bookworm-minbase.tar
APT_ARCHIVES=$CACHE/apt-archives
CHROOT=$WORK/root

if [[ $(id -u) -ne 0 ]]; then
  echo "check_clean_install: needs root (debootstrap, mount, chroot)" >&2
  exit 77
fi
if ! git -C "$ROOT_DIR" rev-parse --verify -q HEAD >/dev/null; then
  echo "check_clean_install: $ROOT_DIR is not a git checkout with a commit (the check installs HEAD)" >&2
  exit 1
fi

# The first Debian mirror of this machine's apt sources (deb822 or one-line
# format): the chroot downloads from where this machine does.
debian_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    if [[ $f == *.sources ]]; then
      uri=$(awk '/^URIs:/ {print $2}' "$f" | grep -v -- '-security' | grep -i debian | head -n1 || true)
    else
      uri=$(awk '$1 == "deb" && $0 ~ /bookworm( |$)/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' "$f" | grep -i debian | head -n1 || true)
    fi
    if [[ -n $uri ]]; then echo "$uri"; return; fi
  done
  echo "check_clean_install: no Debian mirror found in /etc/apt/sources.list{,.d}" >&2
  return 1
}

unmount_all() {
  local m
  for m in var/cache/apt/archives dev/pts dev proc sys; do
    if mountpoint -q "$CHROOT/$m" 2>/dev/null; then umount -l "$CHROOT/$m" || true; fi
  done
}
trap unmount_all EXIT

# rm -rf of the root only once nothing is mounted below it (a bind mount
# still there would take /dev's or the apt cache's contents with it).
remove_root() {
  unmount_all
  if [[ -d $CHROOT ]] && findmnt -rn -o TARGET | grep -q "^$CHROOT/"; then
    echo "check_clean_install: still mounted under $CHROOT; not removing it" >&2
    exit 1
  fi
  rm -rf "$CHROOT"
}

start=$(date +%s)
mkdir -p "$WORK" "$CACHE" "$APT_ARCHIVES/partial"
if [[ ! -s $BASE_TAR ]]; then
  command -v debootstrap >/dev/null || {
    echo "check_clean_install: installing debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  mirror=$(debian_mirror)
  echo "check_clean_install: debootstrap --variant=minbase bookworm from $mirror"
  rm -rf "$WORK/base"
  debootstrap --variant=minbase bookworm "$WORK/base" "$mirror" >"$WORK/debootstrap.log" 2>&1 || {
    tail -n 20 "$WORK/debootstrap.log" >&2
    echo "check_clean_install: debootstrap failed (log: $WORK/debootstrap.log)" >&2
    exit 1
  }
  tar -C "$WORK/base" -cf "$BASE_TAR.tmp" . && mv "$BASE_TAR.tmp" "$BASE_TAR"
  rm -rf "$WORK/base"
fi
echo "check_clean_install: bare base ready after $(( $(date +%s) - start )) s"

# A fresh root from the bare base every time.
remove_root
mkdir -p "$CHROOT"
tar -C "$CHROOT" -xf "$BASE_TAR"
mkdir -p "$CHROOT/work/ggtrain"
git -C "$ROOT_DIR" archive HEAD | tar -x -C "$CHROOT/work/ggtrain"
cp /etc/resolv.conf "$CHROOT/etc/resolv.conf"
mount -t proc proc "$CHROOT/proc"
mount --bind /dev "$CHROOT/dev"
mount --bind /dev/pts "$CHROOT/dev/pts"
mount -t sysfs sysfs "$CHROOT/sys"
mkdir -p "$CHROOT/var/cache/apt/archives"
mount --bind "$APT_ARCHIVES" "$CHROOT/var/cache/apt/archives"

# What a new user runs: the README's set-up (only the main job's target, as
# scripts/run.sh builds), then a short training. One CPU level (v2) is
# enough to prove the packages; every level is built and tested by the main
# build, and building all three here would add about two minutes to CI.
inner='set -euo pipefail
cd /work/ggtrain
t0=$(date +%s)
GGTRAIN_CPU_LEVELS=v2 bash scripts/setup.sh ggtrain
echo "check_clean_install: setup.sh took $(( $(date +%s) - t0 )) s"
mkdir -p /tmp/ck && bible -f Gen1:1-Gen50:26 </dev/null | sed "s/^[^ ]* //" > /tmp/ck/corpus.txt
./build/src/ggtrain train --preset tiny --run-dir /tmp/ck/run --quiet \
  --set data.corpus=/tmp/ck/corpus.txt --set train.steps=10 --set checkpoint.every=10 \
  --set train.eval_every=0 --set train.sample_every=0
test -s /tmp/ck/run/weights/step_10.gguf
./build/src/ggtrain inspect /tmp/ck/run/weights/step_10.gguf | head -n 3
[[ $(ls -A /work) == ggtrain ]] || { echo "check_clean_install: /work holds more than the tree: $(ls -A /work)"; exit 1; }
t0=$(date +%s)
GGTRAIN_CPU_LEVELS=v2 bash scripts/setup.sh ggtrain_reference_tests ggtrain_tests
ctest --test-dir build --no-tests=error --output-on-failure -j "$(nproc)" \
  -R "^(Reference\.|GgufFixtures\.|fixtures_check$|outside_path_lint$)" | tail -n 3 | sed "s/^/check_clean_install: ctest: /"
echo "check_clean_install: the fixture tests took $(( $(date +%s) - t0 )) s"'
env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
  chroot "$CHROOT" /bin/bash -c "$inner" >"$WORK/inside.log" 2>&1 || {
  tail -n 30 "$WORK/inside.log" >&2
  echo "check_clean_install: FAILED inside the bare Debian 12 (log: $WORK/inside.log)" >&2
  exit 1
}
grep '^check_clean_install:' "$WORK/inside.log" || true
remove_root
echo "check_clean_install: passed (setup, a 10-step tiny training that wrote weights/step_10.gguf, the fixture tests with nothing beside the tree) in $(( $(date +%s) - start )) s"
