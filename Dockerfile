# The Toren image: one image for `toren serve` (the API) and `toren worker`, used by
# deploy/compose and deploy/aws. For machines that can pull from a registry:
#
#   docker build -t toren:latest .
#
# Without a registry, scripts/build-toren-image builds an equivalent image from this
# checkout's binary and Debian's packages (a bookworm root filesystem, the same user, paths,
# environment and entrypoint).

# 1. The release binary.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p toren \
 && install -m 0755 target/release/toren /usr/local/bin/toren

# 2. The runtime: slim Debian, a non-root user, nothing else.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates bubblewrap \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 toren \
 && useradd --system --uid 10001 --gid toren --home-dir /var/lib/toren --create-home toren
COPY --from=build /usr/local/bin/toren /usr/local/bin/toren
USER toren:toren
WORKDIR /var/lib/toren
ENV TOREN_HOME=/var/lib/toren \
    TOREN_AGENTS=/etc/toren/agents \
    TOREN_API_ADDR=0.0.0.0:8080 \
    LANG=C.UTF-8
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/toren"]
CMD ["serve"]
