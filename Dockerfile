# The subflow worker. Built by docker-compose.yml; the build context is the repository root.
# One binary: the worker, which is also the sdk child runtime (`subflow-worker child-runtime`),
# so sdk runs need nothing else installed.
ARG GO_VERSION=1.26.8
ARG DEBIAN_VERSION=bookworm-slim

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .ci/compose-check.sh runs this line on a copy of the build context. GOWORK=off: the worker is
# built from the root module alone (the context leaves out the workspace's other modules).
# The build id of the worker's Worker Deployment version is the binary's SHA-256 (the
# context has no .git, so the binary records no VCS revision): a new build, a new id.
RUN CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags="-s -w" -o /out/subflow-worker ./worker && echo "sha-$(sha256sum /out/subflow-worker | cut -c1-12)" >/out/build-id

FROM debian:${DEBIAN_VERSION}
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 subflow \
 && mkdir /workspace && chown subflow /workspace
COPY --from=build /out/subflow-worker /usr/local/bin/subflow-worker
COPY --from=build /out/build-id /etc/subflow-build-id
USER subflow
WORKDIR /workspace
# Used only when SUBFLOW_SESSION_STORE is unset (compose sets a postgres:// URL).
ENV SUBFLOW_SESSION_ROOT=/home/subflow/sessions
EXPOSE 9090
# $SUBFLOW_BUILD_ID, when set, names the build instead.
ENTRYPOINT ["/bin/sh", "-c", "export SUBFLOW_BUILD_ID=\"${SUBFLOW_BUILD_ID:-$(cat /etc/subflow-build-id)}\"; exec subflow-worker \"$@\"", "subflow-worker"]
