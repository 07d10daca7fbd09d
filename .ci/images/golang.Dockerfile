# Stand-in for the official golang image, for deploy/Dockerfile's build
# stage: this machine's Go toolchain (/usr/local/go) and CA certificates on a
# minimal Debian root file system (built by build.sh, passed as ROOTFS).
ARG ROOTFS
FROM ${ROOTFS}
ENV GOPATH=/go \
    PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    GOTOOLCHAIN=local
WORKDIR /go
