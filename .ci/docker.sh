# shellcheck shell=bash
# Docker for CI (sourced by .ci/run, after lib.sh): the engine, the compose
# implementation, and the removal of everything the tests leave behind.

# start_docker_engine installs Debian's docker.io if needed and starts
# dockerd in the background unless an engine already answers.
start_docker_engine() {
	if ! command -v dockerd >/dev/null; then
		apt_install docker.io
	fi
	if docker info >/dev/null 2>&1; then
		log "Docker engine: running ($(docker version -f '{{.Server.Version}}'))"
		return
	fi
	log "Docker engine: starting dockerd (log in /var/log/dockerd.log)"
	(setsid dockerd </dev/null >>/var/log/dockerd.log 2>&1 &)
	for _ in $(seq 1 120); do
		docker info >/dev/null 2>&1 && break
		sleep 0.5
	done
	docker info >/dev/null
	log "Docker engine: $(docker version -f '{{.Server.Version}}'), storage $(docker info -f '{{.Driver}}')"
}

# The compose implementation: Debian's docker-compose, Compose v1 (1.29).
# Compose v2, the one users run as `docker compose`, is not packaged in
# Debian bookworm, and building it from its module on the Go module proxy
# (inside its own module: its go.mod has exclude directives, which
# `go install …@version` refuses) took over a quarter of an hour on a 2-core
# machine. docker-compose.yml is written for both.
#
# install_compose sets $compose to the compose command.
install_compose() {
	if ! command -v docker-compose >/dev/null; then
		apt_install docker-compose
	fi
	compose=docker-compose
	log "compose: $(docker-compose version --short)"
}

# remove_test_containers removes what the tests started: testcontainers'
# containers (its reaper is off here), and the containers, networks and
# volumes of deploy's Docker tests (names and compose projects idgen-test-*).
remove_test_containers() {
	docker info >/dev/null 2>&1 || return 0
	local ids
	ids=$({
		docker ps -aq --filter label=org.testcontainers=true
		docker ps -aq --filter name=idgen-test-
	} | sort -u)
	if [ -n "$ids" ]; then
		log "removing $(echo "$ids" | wc -l) test containers"
		echo "$ids" | xargs docker rm -f -v >/dev/null
	fi
	docker network ls -q --filter name=idgen-test- | xargs -r docker network rm >/dev/null 2>&1 || true
	docker volume ls -q --filter name=idgen-test- | xargs -r docker volume rm >/dev/null 2>&1 || true
}
