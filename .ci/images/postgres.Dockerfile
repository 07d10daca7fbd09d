# Stand-in for the official postgres image: Debian's postgresql-15 on a
# minimal Debian root file system (built by build.sh, passed as ROOTFS).
ARG ROOTFS
FROM ${ROOTFS}
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data
VOLUME /var/lib/postgresql/data
EXPOSE 5432
# Fast shutdown, as the official image: roll back open transactions, then stop.
STOPSIGNAL SIGINT
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
