# SPDX-License-Identifier: Apache-2.0
# baton-agent, the leader-elected cron sidecar. Build from the repository root:
#   docker build -f deploy/docker/baton-agent.Dockerfile -t baton/baton-agent:0.1.0 .
# Run with a configuration file mounted at /etc/baton/agent.yaml (none is built in); flags after the image
# name override the file (--identity, --server, --listen):
#   docker run -d -v "$PWD/agent.yaml:/etc/baton/agent.yaml:ro" baton/baton-agent:0.1.0 --identity node-1
# Command jobs run inside this image: /bin/sh, coreutils, curl and the baton CLI (a job can take a lock of its
# own with `baton exec`) are there; add what your jobs need.

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
 && cmake --build build --target baton-agent baton

FROM debian:12-slim
# The shared libraries baton-agent and baton link (ldd build/bin/baton-agent); tzdata for the jobs' time zones;
# curl for the health check and for jobs.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libboost-json1.81.0 libboost-url1.81.0 libboost-program-options1.81.0 \
      libyaml-cpp0.7 libdate-tz3 tzdata \
      libssl3 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 baton \
 && useradd --system --uid 10001 --gid baton --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin baton
COPY --from=build /src/build/bin/baton-agent /usr/local/bin/baton-agent
COPY --from=build /src/build/bin/baton /usr/local/bin/baton
# OCI annotations (docker inspect, registries). After the last RUN, so another VERSION reuses every layer.
# VERSION defaults to the project's version in CMakeLists.txt (keep them equal; tests/deploy checks it).
# SOURCE_URL is a placeholder: set it to the repository you build from (--build-arg SOURCE_URL=https://...).
ARG VERSION=0.1.0
ARG SOURCE_URL=https://git.example.com/baton/baton
LABEL org.opencontainers.image.title="baton-agent" \
      org.opencontainers.image.description="Baton sidecar: leader election and leader-elected cron jobs" \
      org.opencontainers.image.source="$SOURCE_URL" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="$VERSION"
USER baton:baton
EXPOSE 7071
# SIGTERM (the default): the agent stops starting runs, gives running jobs shutdown_grace, stops them and
# releases its lease. The runtime's stop timeout must exceed shutdown_grace + the jobs' grace
# (docker stop -t, compose stop_grace_period, Kubernetes terminationGracePeriodSeconds); docker's is 10s.
STOPSIGNAL SIGTERM
# Assumes the configuration's listen port is 7071; change this with it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:7071/healthz || exit 1
ENTRYPOINT ["/usr/local/bin/baton-agent", "--config", "/etc/baton/agent.yaml"]
