# The KUDO manager image (`kubectl kudo init` deploys kudo-rs/manager:v<version>).
# Multi-stage: build the workspace's CLI binary, then ship it alone on a slim base.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p kubectl-kudo \
 && install -D target/release/kubectl-kudo /out/kubectl-kudo

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 65532 kudo
COPY --from=build /out/kubectl-kudo /usr/local/bin/kubectl-kudo
USER 65532
ENTRYPOINT ["/usr/local/bin/kubectl-kudo"]
CMD ["manager"]
