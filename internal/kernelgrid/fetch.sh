#!/usr/bin/env bash
# Installs qemu and downloads what the kernel grid boots: Debian's kernel
# packages (bullseye 5.10, bookworm 6.1, bookworm-backports 6.12, amd64 and
# arm64), busybox-static and the dynamic loader (libc6) of each
# architecture, each unpacked under CACHE/<package>. Idempotent: a package
# already unpacked is not downloaded again.
#
# The archive is the one this machine's apt already uses (its debian.sources
# or sources.list), so no mirror is named here; a private apt state keeps the
# host's own package lists untouched.
set -euo pipefail
cache=${1:?usage: fetch.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-system-aarch64 >/dev/null || need+=(qemu-system-arm)
command -v dpkg-deb >/dev/null || need+=(dpkg)
if ((${#need[@]})); then
	echo "installing: ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The Debian archive this machine uses: the first URI of its main sources.
uri=""
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' "$f")
	[ -n "$uri" ] && break
done
if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
	uri=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
fi
if [ -z "$uri" ]; then
	echo "fetch.sh: no Debian archive in this machine's apt sources" >&2
	exit 1
fi

# Everything unpacked already: nothing to download, not even the lists.
kernels=(bullseye:amd64:5.10 bookworm:amd64:6.1 bookworm:arm64:6.1 bookworm-backports:amd64:6.12 bookworm-backports:arm64:6.12)
missing=0
for k in "${kernels[@]}"; do
	[ -f "$cache/kernel-${k##*:}-$(cut -d: -f2 <<<"$k")/.done" ] || missing=1
done
for n in busybox-amd64 busybox-arm64 libc6-amd64 libc6-arm64; do
	[ -f "$cache/$n/.done" ] || missing=1
done
if [ $missing = 0 ]; then
	echo "fetch.sh: kernels, busybox and loaders already in $cache"
	exit 0
fi

apt="$cache/apt"
mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/etc/preferences.d" "$apt/etc/sources.list.d"
# bullseye is signed by the bullseye keys, which debian-archive-keyring.gpg
# holds along with bookworm's.
cat >"$apt/etc/sources.list.d/grid.sources" <<SOURCES
Types: deb
URIs: $uri
Suites: bullseye
Components: main
Architectures: amd64
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $uri
Suites: bookworm bookworm-backports
Components: main
Architectures: amd64 arm64
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
: >"$apt/etc/sources.list"
: >"$apt/status"
# A private apt state (lists, status, sources, archives): the host's own
# package lists and architectures stay as they are. No translations or
# AppStream metadata: only the Packages lists are needed.
opts=(-o "Dir::State=$apt" -o "Dir::State::Lists=$apt/lists" -o "Dir::State::status=$apt/status"
	-o "Dir::Etc::SourceList=$apt/etc/sources.list" -o "Dir::Etc::SourceParts=$apt/etc/sources.list.d"
	-o "Dir::Etc::Preferences=$apt/etc/preferences" -o "Dir::Etc::PreferencesParts=$apt/etc/preferences.d"
	-o "Dir::Cache=$apt" -o "Dir::Cache::archives=$apt/archives"
	-o "APT::Architecture=amd64" -o "APT::Architectures::=amd64" -o "APT::Architectures::=arm64"
	-o "Acquire::Languages=none" -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::CNF::DefaultEnabled=false"
	-o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")

# A day-old package list is fresh enough.
if [ -z "$(find "$apt/lists" -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
	apt-get "${opts[@]}" update -qq
fi

# kernel_of SUITE ARCH: the versioned kernel package the suite's metapackage
# depends on (linux-image-6.1.0-NN-amd64).
kernel_of() {
	apt-cache "${opts[@]}" show "linux-image-$2:$2/$1" 2>/dev/null |
		awk -F': ' '/^Depends:/ {print $2; exit}' | tr ',' '\n' |
		sed -E 's/^ *//; s/ .*//; s/:.*//' | grep -E '^linux-image-[0-9]' | head -1
}

# fetch PACKAGE ARCH SUITE NAME: download and unpack into CACHE/NAME.
fetch() {
	local pkg=$1 arch=$2 suite=$3 name=$4
	[ -f "$cache/$name/.done" ] && return 0
	local dir
	dir=$(mktemp -d "$cache/.dl-XXXXXX")
	(cd "$dir" && apt-get "${opts[@]}" download -qq "$pkg:$arch/$suite")
	rm -rf "${cache:?}/$name"
	mkdir -p "$cache/$name"
	dpkg-deb -x "$dir"/*.deb "$cache/$name"
	rm -rf "$dir"
	case $pkg in
	linux-image-*) rm -rf "${cache:?}/$name/lib" "${cache:?}/$name/usr" ;; # the guests load no modules
	esac
	echo "$pkg:$arch/$suite" >"$cache/$name/.done"
	echo "fetched $pkg:$arch/$suite"
}

for k in "${kernels[@]}"; do
	IFS=: read -r suite arch ver <<<"$k"
	if [ -f "$cache/kernel-$ver-$arch/.done" ]; then
		continue
	fi
	pkg=$(kernel_of "$suite" "$arch")
	if [ -z "$pkg" ]; then
		echo "fetch.sh: no kernel package for $arch in $suite" >&2
		exit 1
	fi
	fetch "$pkg" "$arch" "$suite" "kernel-$ver-$arch"
done
for arch in amd64 arm64; do
	fetch busybox-static "$arch" bookworm "busybox-$arch"
	fetch libc6 "$arch" bookworm "libc6-$arch"
done
