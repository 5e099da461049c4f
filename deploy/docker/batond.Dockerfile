# SPDX-License-Identifier: Apache-2.0
# batond, the lock server. Build from the repository root (the context must be the checkout):
#   docker build -f deploy/docker/batond.Dockerfile -t baton/batond:0.1.0 .
# Run (the data directory is a volume; keep the port private, and give batond a tokens file, docs/security.md):
#   docker run -d --name batond -v batond-data:/var/lib/baton -p 127.0.0.1:7070:7070 baton/batond:0.1.0
# With TLS (docs/security.md): mount the certificate and add the flags; the health check tries both schemes.
#   docker run ... -v /etc/baton/tls:/etc/baton/tls:ro baton/batond:0.1.0 \
#     --tls-cert /etc/baton/tls/batond.pem --tls-key /etc/baton/tls/batond.key
# Extra batond flags go after the image name (--threads 4); --listen and --data-dir are fixed here.
# The image also holds the baton CLI, for an operator inside the container (docker exec batond baton get KEY).

FROM debian:12 AS build
WORKDIR /src
# The installer first, alone, so the package layer is reused while only sources change.
COPY deploy/install-deps.sh deploy/install-deps.sh
RUN bash deploy/install-deps.sh build
# Only what the build reads: the sources are named one by one because a .dockerignore would have to sit at
# the repository root, and BuildKit then sends just these paths (not build/ or .git).
COPY CMakeLists.txt ./
COPY cmake cmake
COPY common common
COPY sdk sdk
COPY server server
COPY agent agent
COPY examples examples
COPY bench bench
# Ninja: install-deps.sh installs ninja-build, and make is not installed (no recommends).
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBATON_BUILD_TESTS=OFF \
 && cmake --build build --target batond baton

FROM debian:12-slim
# The shared libraries batond and baton link (ldd build/bin/batond; libssl3 for TLS), and curl for the health
# check.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libboost-json1.81.0 libboost-url1.81.0 libboost-program-options1.81.0 \
      libssl3 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
# A fixed uid/gid so volume ownership and Kubernetes' runAsUser/fsGroup (10001) agree. The data directory is
# created and owned here before VOLUME: a new named volume starts as a copy of it, owned by baton.
RUN groupadd --system --gid 10001 baton \
 && useradd --system --uid 10001 --gid baton --home-dir /var/lib/baton --shell /usr/sbin/nologin baton \
 && install -d -o baton -g baton -m 0700 /var/lib/baton
COPY --from=build /src/build/bin/batond /usr/local/bin/batond
COPY --from=build /src/build/bin/baton /usr/local/bin/baton
# OCI annotations (docker inspect, registries). After the last RUN, so another VERSION reuses every layer.
# VERSION defaults to the project's version in CMakeLists.txt (keep them equal; tests/deploy checks it).
# SOURCE_URL is a placeholder: set it to the repository you build from (--build-arg SOURCE_URL=https://...).
ARG VERSION=0.1.0
ARG SOURCE_URL=https://git.example.com/baton/baton
LABEL org.opencontainers.image.title="batond" \
      org.opencontainers.image.description="Baton lock server: leases with fencing tokens, durable across restarts" \
      org.opencontainers.image.source="$SOURCE_URL" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="$VERSION"
USER baton:baton
VOLUME /var/lib/baton
EXPOSE 7070
# docker stop sends SIGTERM (the default): batond stops accepting, answers in-flight requests, flushes its log.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:7070/healthz \
   || curl -fsSk -o /dev/null https://127.0.0.1:7070/healthz || exit 1
# 0.0.0.0: inside a container loopback is the container's own, so other containers and the published port
# reach batond only on the container's interface. batond's own default stays 127.0.0.1.
ENTRYPOINT ["/usr/local/bin/batond", "--listen", "0.0.0.0:7070", "--data-dir", "/var/lib/baton"]
