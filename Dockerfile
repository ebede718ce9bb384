# The coordinator's image (the last stage, the default target), and tandem-web's (the
# target `web`). docker-compose.yml builds both; the broker runs from
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

# tandem-web, from the same resolved packages: its page is a resource bundle, copied
# beside the binary (where Bundle.module looks first).
FROM build AS web-build
RUN swift build -c release --product tandem-web --static-swift-stdlib \
    && mkdir -p /out \
    && cp -R "$(swift build -c release --show-bin-path)/tandem-web" \
        "$(swift build -c release --show-bin-path)/tandem_TandemWeb.resources" /out/

FROM debian:bookworm-slim AS web
# libmosquitto1: the C library TandemClient links; libstdc++6 as for the coordinator.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmosquitto1 libstdc++6 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 tandem \
    && useradd --system --uid 10001 --gid tandem --no-create-home --shell /usr/sbin/nologin tandem
COPY --from=web-build /out/ /usr/local/bin/
USER tandem
ENV TANDEM_HTTP_HOST=0.0.0.0
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/tandem-web"]

FROM debian:bookworm-slim AS coordinator
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
