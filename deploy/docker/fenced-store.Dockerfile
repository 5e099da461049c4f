# SPDX-License-Identifier: Apache-2.0
# fenced-store, the example key-value store that enforces fencing tokens. Build from the repository root:
#   docker build -f deploy/docker/fenced-store.Dockerfile -t baton/fenced-store:0.1.0 .
#   docker run -d --name fenced-store -p 127.0.0.1:7080:7080 baton/fenced-store:0.1.0
# Its state is in memory only: a restart forgets every item and every token it has seen.

FROM debian:12 AS build
WORKDIR /src
COPY deploy/install-deps.sh deploy/install-deps.sh
RUN bash deploy/install-deps.sh build
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
 && cmake --build build --target fenced-store

FROM debian:12-slim
# The shared libraries fenced-store links (ldd build/bin/fenced-store), and curl for the health check.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libboost-json1.81.0 libboost-url1.81.0 libboost-program-options1.81.0 \
      libssl3 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 baton \
 && useradd --system --uid 10001 --gid baton --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin baton
COPY --from=build /src/build/bin/fenced-store /usr/local/bin/fenced-store
# OCI annotations (docker inspect, registries). After the last RUN, so another VERSION reuses every layer.
# VERSION defaults to the project's version in CMakeLists.txt (keep them equal; tests/deploy checks it).
# SOURCE_URL is a placeholder: set it to the repository you build from (--build-arg SOURCE_URL=https://...).
ARG VERSION=0.1.0
ARG SOURCE_URL=https://git.example.com/baton/baton
LABEL org.opencontainers.image.title="fenced-store" \
      org.opencontainers.image.description="Baton example store that refuses writes with a stale fencing token" \
      org.opencontainers.image.source="$SOURCE_URL" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="$VERSION"
USER baton:baton
EXPOSE 7080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:7080/healthz || exit 1
# 0.0.0.0: other containers reach it only on the container's interface.
ENTRYPOINT ["/usr/local/bin/fenced-store", "--listen", "0.0.0.0:7080"]
