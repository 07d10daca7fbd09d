# Stand-in for the official mysql image: Debian's MariaDB 10.11 on a minimal
# Debian root file system (built by build.sh, passed as ROOTFS).
ARG ROOTFS
FROM ${ROOTFS}
COPY mysql-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
# Like the official image: reachable from outside the container, and no DNS
# look-ups of clients.
COPY mysql-container.cnf /etc/mysql/mariadb.conf.d/99-container.cnf
VOLUME /var/lib/mysql
EXPOSE 3306
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["mariadbd"]
