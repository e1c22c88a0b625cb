# The gateway, built from the official Swift image and run as a non-root user on a slim Debian
# (the same Debian 12 the project's machines build on). docker-compose.yml runs it with the demo
# backends; policies and certificates are mounted read-only, never baked in.

# ---- build: a release build of the one product, the Swift runtime linked statically ----
FROM swift:6.3.1-bookworm AS build
RUN apt-get -q update \
    && apt-get -q install -y --no-install-recommends libssl-dev libcurl4-openssl-dev libxml2-dev zlib1g-dev libbrotli-dev libzstd-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
# The manifest names the test targets too, so their directories must exist for it to load.
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product portico --static-swift-stdlib -Xswiftc -cross-module-optimization \
    && cp "$(swift build -c release --show-bin-path)/portico" /build/portico

# ---- run: the binary and the system libraries it links (OpenSSL, libcurl, libxml2, zlib, brotli, zstd) ----
FROM debian:bookworm-slim
RUN apt-get -q update \
    && apt-get -q install -y --no-install-recommends libssl3 libcurl4 libxml2 zlib1g libbrotli1 libzstd1 ca-certificates tzdata curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin portico \
    && mkdir -p /etc/portico/policies /etc/portico/certs
COPY --from=build /build/portico /usr/local/bin/portico
USER portico:portico
EXPOSE 8080 8443
ENTRYPOINT ["/usr/local/bin/portico"]
CMD ["serve", "--policies", "/etc/portico/policies"]
