# Stand-in for the official alpine image, for deploy/Dockerfile's run stage:
# a shell, CA certificates and wget (the HEALTHCHECK's probe) on a minimal
# Debian root file system (built by build.sh, passed as ROOTFS).
ARG ROOTFS
FROM ${ROOTFS}
CMD ["/bin/sh"]
