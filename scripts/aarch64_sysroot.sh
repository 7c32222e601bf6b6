#!/usr/bin/env bash
# Makes the arm64 sysroot that cmake/aarch64-linux-gnu.cmake builds against
# and qemu-user runs in: Debian 12's arm64 packages of ggtrain's libraries
# (and what they depend on), extracted into DIR.
#
#   bash scripts/aarch64_sysroot.sh DIR
#
# Nothing is installed on this machine: apt reads arm64 package lists into a
# private state folder (no `dpkg --add-architecture`; several of these -dev
# packages cannot sit beside their amd64 twins) and downloads the .deb files
# into ~/.cache/ggtrain/aarch64 (kept, as CI clones afresh); dpkg-deb unpacks
# them. The C library's headers are left out: the cross compiler brings its
# own, and a second copy on the include path would hide libstdc++'s wrappers.
set -euo pipefail
root=$(realpath -m "${1:?usage: aarch64_sysroot.sh DIR}")
cache=${GGTRAIN_AARCH64_CACHE:-$HOME/.cache/ggtrain/aarch64}

# ggtrain's libraries as scripts/setup.sh names them (ocl-icd-opencl-dev:
# oneDNN's CMake package looks for OpenCL), and the runtime of the cross
# compiler's programs under qemu.
wanted=(libdnnl-dev ocl-icd-opencl-dev libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev
        libsentencepiece-dev libtomlplusplus-dev libicu-dev zlib1g-dev libzstd-dev libsimdjson-dev
        libc6 libstdc++6 libgcc-s1 libgomp1)
# Headers and tools of the C library, which the cross toolchain has.
unwanted='^(libc6-dev|linux-libc-dev|libcrypt-dev|libnsl-dev|libtirpc-dev|rpcsvc-proto|libc-dev-bin)$'

mkdir -p "$cache/state/lists/partial" "$cache/archives/partial" "$cache/debs"
touch "$cache/status"
apt_opts=(-o Dir::State="$cache/state" -o Dir::State::status="$cache/status" -o Dir::Cache="$cache/archives"
          -o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Debug::NoLocking=1
          -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update -qq
mapfile -t closure < <(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
                         --no-breaks --no-replaces --no-enhances --no-pre-depends "${wanted[@]}" |
                       grep -v '^[ <]' | sort -u | grep -Ev "$unwanted")
(( ${#closure[@]} >= ${#wanted[@]} )) || { echo "aarch64_sysroot: apt resolved only ${closure[*]}" >&2; exit 1; }

# Download what the cache lacks or holds damaged (checked against the
# SHA-256 of apt's signed lists; file names carry the version, so an updated
# package is fetched anew), then unpack every one into a fresh DIR.
files=() hashes=()
while read -r _ file _ hash; do
  files+=("$file")
  hashes+=("${hash#SHA256:}")
done < <(apt-get "${apt_opts[@]}" download --print-uris "${closure[@]}")
missing=()
for i in "${!files[@]}"; do
  f=$cache/debs/${files[$i]}
  [[ -s $f && $(sha256sum "$f" | cut -d' ' -f1) == "${hashes[$i]}" ]] || missing+=("${files[$i]%%_*}")
done
if (( ${#missing[@]} )); then
  (cd "$cache/debs" && apt-get "${apt_opts[@]}" download "${missing[@]}" >/dev/null)
fi
# Versions no longer listed (an update replaced them) leave the cache.
for f in "$cache"/debs/*.deb; do
  [[ " ${files[*]} " == *" ${f##*/} "* ]] || rm -f "$f"
done
rm -rf "$root"
mkdir -p "$root"
for f in "${files[@]}"; do dpkg-deb -x "$cache/debs/$f" "$root"; done

# Absolute links (libz.so -> /lib/aarch64-linux-gnu/libz.so.1) would point at
# the host: point them into the sysroot.
while IFS= read -r -d '' link; do
  ln -sfn "$root$(readlink "$link")" "$link"
done < <(find "$root" -type l -lname '/*' -print0)
echo "aarch64_sysroot: ${#files[@]} arm64 packages in $root (${#missing[@]} downloaded)"
