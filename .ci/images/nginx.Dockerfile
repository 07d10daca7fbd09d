# Stand-in for the official nginx image: Debian's nginx on a minimal Debian
# root file system (built by build.sh, passed as ROOTFS). It serves what
# /etc/nginx/conf.d/*.conf says (Debian's default site is removed) and logs
# to the container's output.
ARG ROOTFS
FROM ${ROOTFS}
EXPOSE 80
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
