# Toren's default sandbox image, toren-sandbox:bookworm: Debian 12 with bash, node, npm,
# python, pip and git. For machines that can pull from a registry:
#
#   docker build -t toren-sandbox:bookworm -f docker/sandbox.Dockerfile docker
#
# Without a registry, scripts/build-sandbox-image builds the same image from Debian packages.
# The docker backend runs its own helper as the container's PID 1 (bind-mounted read-only),
# so this image needs no entrypoint; any image with /bin/sh works as `sandbox.image`.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash ca-certificates curl git nodejs npm procps python3 python3-pip python3-venv \
 && rm -rf /var/lib/apt/lists/*
ENV LANG=C.UTF-8
WORKDIR /workspace
CMD ["bash"]
