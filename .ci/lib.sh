# shellcheck shell=bash
# Helpers shared by the CI scripts (sourced, not run).

log() { printf '== %s\n' "$*"; }

# docker: Debian's client (package docker.io) once it is installed. It
# matches the engine CI starts and builds with BuildKit (DOCKER_BUILDKIT=1)
# by itself; a newer client found first on PATH would need the buildx
# plugin for that, which no registry here provides.
docker() {
	if [ -x /usr/bin/docker ]; then
		/usr/bin/docker "$@"
	else
		command docker "$@"
	fi
}

# apt_install PACKAGE…: Debian packages, quietly.
apt_install() {
	log "installing $*"
	export DEBIAN_FRONTEND=noninteractive
	if [ -z "${apt_updated:-}" ]; then
		apt-get update -qq
		apt_updated=1
	fi
	apt-get install -y -qq "$@" >/dev/null
}
