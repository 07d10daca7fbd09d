#!/bin/bash
# Entrypoint of the MySQL stand-in image (Debian's MariaDB 10.11), which
# behaves as the official mysql image does where idgen's tests and compose
# file rely on it:
#   - MYSQL_ROOT_PASSWORD (or MYSQL_ALLOW_EMPTY_PASSWORD=yes), MYSQL_DATABASE,
#     MYSQL_USER and MYSQL_PASSWORD set up the accounts and database on first
#     start, in /var/lib/mysql; scripts in /docker-entrypoint-initdb.d (*.sh,
#     *.sql) run once after that;
#   - the set-up runs on a server without networking, which logs "port: 0";
#     the server started afterwards logs "Version: '…'  socket: '…'  port:
#     3306" once it accepts connections;
#   - the server listens on every interface; root may log in from anywhere.
set -euo pipefail

if [ "${1:0:1}" = '-' ]; then
	set -- mariadbd "$@"
fi
case "$1" in
mysqld | mariadbd) shift; set -- mariadbd --user=mysql "$@" ;;
*) exec "$@" ;;
esac

datadir=/var/lib/mysql
socket=/run/mysqld/mysqld.sock
mkdir -p "$datadir" /run/mysqld
chown mysql:mysql "$datadir" /run/mysqld

if [ ! -d "$datadir/mysql" ]; then
	if [ -z "${MYSQL_ROOT_PASSWORD:-}" ] && [ "${MYSQL_ALLOW_EMPTY_PASSWORD:-}" != yes ]; then
		echo "error: set MYSQL_ROOT_PASSWORD or MYSQL_ALLOW_EMPTY_PASSWORD=yes" >&2
		exit 1
	fi
	if [ "${MYSQL_USER:-}" = root ]; then
		echo "error: MYSQL_USER and MYSQL_PASSWORD are for a user other than root" >&2
		exit 1
	fi
	mariadb-install-db --user=mysql --datadir="$datadir" --auth-root-authentication-method=normal \
		--skip-test-db >/dev/null
	"$@" --skip-networking --socket="$socket" &
	pid=$!
	for _ in $(seq 1 60); do
		mariadb-admin --socket="$socket" -uroot ping --silent >/dev/null 2>&1 && break
		sleep 0.5
	done
	mariadb-admin --socket="$socket" -uroot ping --silent >/dev/null

	# Values go through SQL string literals: double any single quote.
	q() { printf '%s' "${1//\'/\'\'}"; }
	{
		echo "SET @@SESSION.SQL_LOG_BIN = 0;"
		echo "CREATE USER 'root'@'%' IDENTIFIED BY '$(q "${MYSQL_ROOT_PASSWORD:-}")';"
		echo "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
		echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '$(q "${MYSQL_ROOT_PASSWORD:-}")';"
		if [ -n "${MYSQL_DATABASE:-}" ]; then
			echo "CREATE DATABASE IF NOT EXISTS \`${MYSQL_DATABASE//\`/\`\`}\`;"
		fi
		if [ -n "${MYSQL_USER:-}" ] && [ -n "${MYSQL_PASSWORD:-}" ]; then
			echo "CREATE USER '$(q "$MYSQL_USER")'@'%' IDENTIFIED BY '$(q "$MYSQL_PASSWORD")';"
			if [ -n "${MYSQL_DATABASE:-}" ]; then
				echo "GRANT ALL ON \`${MYSQL_DATABASE//\`/\`\`}\`.* TO '$(q "$MYSQL_USER")'@'%';"
			fi
		fi
		echo "FLUSH PRIVILEGES;"
	} | mariadb --socket="$socket" -uroot
	mysql=(mariadb --socket="$socket" -uroot "--password=${MYSQL_ROOT_PASSWORD:-}")
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sh) echo "running $f"; . "$f" ;;
		*.sql) echo "running $f"; "${mysql[@]}" "${MYSQL_DATABASE:-}" <"$f" ;;
		esac
	done
	mariadb-admin --socket="$socket" -uroot "--password=${MYSQL_ROOT_PASSWORD:-}" shutdown
	wait "$pid"
	echo "MariaDB init process done. Ready for start up."
fi

exec "$@"
