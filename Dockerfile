# The coordinator's image. docker-compose.yml builds it; the broker runs from
# eclipse-mosquitto:2 with broker-config/ mounted.
#
# Build: the same command as scripts/run (checked by scripts/validate-compose.py),
# plus --static-swift-stdlib, so the runtime image needs no Swift runtime libraries.
ARG SWIFT_IMAGE=swift:6.3-bookworm
FROM ${SWIFT_IMAGE} AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmosquitto-dev libsqlite3-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The manifest first, so fetching dependencies is a layer of its own that survives
# source changes.
COPY Package.swift ./
RUN swift package resolve
# Tests/ too: the manifest declares test targets, and SwiftPM wants their
# directories present even when building one product.
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product tandem-coordinator --static-swift-stdlib \
    && mkdir -p /out \
    && cp "$(swift build -c release --show-bin-path)/tandem-coordinator" /out/

FROM debian:bookworm-slim
# libmosquitto1 and libsqlite3-0: the C libraries the coordinator links;
# libstdc++6: still linked dynamically with --static-swift-stdlib (ldd says so);
# mosquitto-clients: mosquitto_sub for the compose healthcheck.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmosquitto1 libsqlite3-0 libstdc++6 mosquitto-clients ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 tandem \
    && useradd --system --uid 10001 --gid tandem --home-dir /data --shell /usr/sbin/nologin tandem \
    && mkdir -p /data \
    && chown tandem:tandem /data
COPY --from=build /out/tandem-coordinator /usr/local/bin/tandem-coordinator
USER tandem
WORKDIR /data
# The database lives here (a named volume in compose); a new volume takes this
# directory's owner, so the non-root user can write it.
VOLUME ["/data"]
ENV TANDEM_DATABASE=/data/tandem.sqlite
ENTRYPOINT ["tandem-coordinator"]
