#!/usr/bin/env bash
# Builds the local stand-ins for the images idgen's tests, Dockerfile and
# compose file name, for machines that reach Debian's package mirror but no
# image registry. Each is a minimal Debian root file system (debootstrap
# --variant=minbase) with Debian's packages, imported with docker import,
# then finished by its Dockerfile here (NAME.Dockerfile: entrypoint, ports,
# environment):
#
#   idgen-ci/postgres:15      postgresql-15, entrypoint as the official postgres image
#   idgen-ci/mysql:mariadb    mariadb-server 10.11, entrypoint as the official mysql image
#   idgen-ci/nginx:bookworm   nginx, the compose file's balancer
#   idgen-ci/golang:local     the Go toolchain of this machine (/usr/local/go), deploy/Dockerfile's build stage
#   idgen-ci/runtime:bookworm ca-certificates and wget, deploy/Dockerfile's run stage
#
# An image already in the engine with the same recipe is kept; otherwise it
# is loaded from the cache directory ($IDGEN_CI_CACHE, default
# /var/cache/idgen-ci) or built and saved there (docker save), keyed by its
# recipe (see recipe below).
#
# Usage: .ci/images/build.sh [image…]   (default: all)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
cache=${IDGEN_CI_CACHE:-/var/cache/idgen-ci}
suite=bookworm
mkdir -p "$cache/debs"

# The Debian mirror apt uses on this machine.
debian_mirror() {
	local m
	m=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\/\{0,1\}\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
	if [ -z "$m" ]; then
		m=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2; exit }' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
	fi
	echo "${m:-http://deb.debian.org/debian}"
}

# recipe NAME: the key of an image's recipe: the functions that make its
# root file system, its Dockerfile and the files that copies; for golang
# also the Go version and the machine's CA certificates.
recipe() {
	{
		echo "$suite"
		declare -f rootfs "rootfs_$1"
		cat "$here/$1.Dockerfile" ${files[$1]:-}
		if [ "$1" = golang ]; then
			/usr/local/go/bin/go version
			cat /etc/ssl/certs/ca-certificates.crt
		fi
	} | sha256sum | cut -c1-16
}

# rootfs DIR PACKAGES: a minimal Debian with PACKAGES (comma-separated) and
# their dependencies, no apt lists or package files left behind.
rootfs() {
	local dir=$1 pkgs=$2
	rm -rf "$dir"
	debootstrap --variant=minbase --include="$pkgs" --cache-dir="$cache/debs" \
		"$suite" "$dir" "$(debian_mirror)" >"$dir.log" 2>&1 || {
		tail -n 30 "$dir.log" >&2
		return 1
	}
	rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/archives/*.deb "$dir"/var/log/*.log "$dir.log"
}

# What each image adds to a minimal Debian, before its Dockerfile.
rootfs_postgres() {
	rootfs "$1" postgresql-15
	# Debian's package created a cluster; the entrypoint makes its own.
	rm -rf "$1"/var/lib/postgresql/15 "$1"/etc/postgresql/15
	mkdir -p "$1/docker-entrypoint-initdb.d"
}
rootfs_mysql() {
	rootfs "$1" mariadb-server
	rm -rf "$1"/var/lib/mysql/*
	mkdir -p "$1/docker-entrypoint-initdb.d"
}
rootfs_nginx() {
	rootfs "$1" nginx,wget
	rm -f "$1"/etc/nginx/sites-enabled/*
	ln -sf /dev/stdout "$1/var/log/nginx/access.log"
	ln -sf /dev/stderr "$1/var/log/nginx/error.log"
}
rootfs_golang() {
	rootfs "$1" ca-certificates
	cp -a /usr/local/go "$1/usr/local/go"
	mkdir -p "$1/go"
	# The build stage downloads modules from the Go module proxy: it trusts
	# the certificate authorities this machine trusts, local ones included.
	cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/ca-certificates.crt"
}
rootfs_runtime() {
	rootfs "$1" ca-certificates,wget
}

# build NAME TAG KEY: the root file system imported, then the image's
# Dockerfile on top of it (the classic builder: no registry, no network).
build() {
	local name=$1 tag=$2 key=$3 dir="$cache/rootfs-$1"
	"rootfs_$name" "$dir"
	tar -C "$dir" -c . | docker import - "$tag-rootfs" >/dev/null
	rm -rf "$dir"
	DOCKER_BUILDKIT=0 docker build -q -f "$here/$name.Dockerfile" --build-arg "ROOTFS=$tag-rootfs" \
		--label "org.idgen.ci.recipe=$key" -t "$tag" "$here" >/dev/null
	docker rmi "$tag-rootfs" >/dev/null
}

# ensure NAME: the image in the engine, by whatever is cheapest.
ensure() {
	local name=$1 tag=${tags[$1]} key have start=$SECONDS
	key=$(recipe "$name")
	have=$(docker image inspect -f '{{index .Config.Labels "org.idgen.ci.recipe"}}' "$tag" 2>/dev/null || true)
	if [ "$have" = "$key" ]; then
		log "image $tag: in the engine"
		return
	fi
	local saved="$cache/$name-$key.tar"
	if [ -s "$saved" ]; then
		docker load -i "$saved" >/dev/null
		log "image $tag: loaded from $saved ($((SECONDS - start))s)"
		return
	fi
	log "image $tag: building"
	build "$name" "$tag" "$key"
	rm -f "$cache/$name"-*.tar
	docker save -o "$saved.tmp" "$tag"
	mv "$saved.tmp" "$saved"
	log "image $tag: built and saved to $saved ($((SECONDS - start))s)"
}

declare -A tags=(
	[postgres]=idgen-ci/postgres:15
	[mysql]=idgen-ci/mysql:mariadb
	[nginx]=idgen-ci/nginx:bookworm
	[golang]=idgen-ci/golang:local
	[runtime]=idgen-ci/runtime:bookworm
)
declare -A files=(
	[postgres]=$here/postgres-entrypoint.sh
	[mysql]="$here/mysql-entrypoint.sh $here/mysql-container.cnf"
)

command -v debootstrap >/dev/null || apt_install debootstrap
for name in "${@:-postgres mysql nginx golang runtime}"; do
	for n in $name; do
		[ -n "${tags[$n]:-}" ] || { echo "unknown image $n" >&2; exit 2; }
		ensure "$n"
	done
done
