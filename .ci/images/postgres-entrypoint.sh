#!/bin/bash
# Entrypoint of the PostgreSQL stand-in image (Debian's postgresql-15), which
# behaves as the official postgres image does where idgen's tests and compose
# file rely on it:
#   - POSTGRES_USER (default postgres), POSTGRES_PASSWORD and POSTGRES_DB
#     (default: the user's name) set up the account and database on first
#     start, in PGDATA (/var/lib/postgresql/data); scripts in
#     /docker-entrypoint-initdb.d (*.sh, *.sql) run once after that;
#   - the set-up runs on a server that listens on no TCP port, which logs
#     "database system is ready to accept connections" once; the server
#     started afterwards logs it again (testcontainers waits for the second);
#   - the server listens on every interface, password (scram-sha-256) for
#     TCP clients, trust on the socket inside the container.
set -euo pipefail

if [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi
if [ "$1" != postgres ]; then
	exec "$@"
fi

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "${POSTGRES_HOST_AUTH_METHOD:-}" != trust ]; then
		echo "error: POSTGRES_PASSWORD is not set (or set POSTGRES_HOST_AUTH_METHOD=trust)" >&2
		exit 1
	fi
	initdb --username="$user" --pwfile=<(printf '%s\n' "${POSTGRES_PASSWORD:-}") \
		--encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
	printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
	printf 'host all all all %s\n' "${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}" >>"$PGDATA/pg_hba.conf"

	pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
	psql=(psql -v ON_ERROR_STOP=1 --username "$user" --no-password --no-psqlrc)
	if [ "$db" != postgres ]; then
		"${psql[@]}" --dbname postgres -q --set db="$db" <<-'SQL'
			CREATE DATABASE :"db";
		SQL
	fi
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sh) echo "running $f"; . "$f" ;;
		*.sql) echo "running $f"; "${psql[@]}" --dbname "$db" -f "$f" ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop
	echo "PostgreSQL init process complete; ready for start up."
fi

exec "$@"
