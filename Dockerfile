# webordinary: one binary, plus what agents and site builds need at run time.
#   docker build -t webordinary .
#   docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     -p 8080:8080 -p 8081:8081 -p 2525:2525 -v wo-data:/data webordinary
# The first start generates the API and dashboard token into /data/secrets/api-token and prints
# it once (docker logs); or pass your own with -e WO_DASHBOARD_TOKEN=... . Serve plus a second
# worker: docker compose up (compose.yaml). CLI commands in the container find the token in
# /data: docker exec <container> webordinary status
# (Not built in CI: the CI machine has no Docker engine; cmd/webordinary TestDockerfileServeStarts
# runs this image's command line, environment and health check as processes.)

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/webordinary ./cmd/webordinary

# Node 22 for site builds (current Astro needs Node >= 22.12) and for the agent CLIs.
FROM node:22-bookworm-slim
# Chromium takes the pictures of changed pages that replies carry (fonts so text renders).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates openssh-client util-linux bubblewrap \
    chromium fonts-liberation hugo \
 && rm -rf /var/lib/apt/lists/*
# The agent CLIs, each at an exact version (cmd/webordinary TestDockerfileHasPicturesAndPinnedAgents
# checks the pins): an image built later runs the CLIs the tests ran. Bump on purpose:
#   docker build --build-arg CODEX_VERSION=$(npm view @openai/codex version) .
ARG CLAUDE_CODE_VERSION=2.1.332
ARG CODEX_VERSION=0.171.0
ARG OPENCODE_VERSION=1.18.33
RUN npm install -g --no-audit --no-fund @anthropic-ai/claude-code@${CLAUDE_CODE_VERSION} \
    @openai/codex@${CODEX_VERSION} opencode-ai@${OPENCODE_VERSION} \
 && npm cache clean --force
COPY --from=build /out/webordinary /usr/local/bin/webordinary
RUN useradd --create-home --uid 10001 webordinary && mkdir -p /data && chown webordinary /data
USER webordinary
WORKDIR /data
# Jobs run in bubblewrap, which needs user namespaces in the container: run it with
#   docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined ...
# (Docker's default seccomp profile refuses unshare/clone of new namespaces). Without that,
# serve refuses to start rather than run jobs unsandboxed.
ENV WO_SANDBOX=required WO_DATA=/data WO_HTTP=0.0.0.0:8080 WO_PREVIEW=0.0.0.0:8081 WO_SMTP=0.0.0.0:2525 WO_NATS_LISTEN=
EXPOSE 8080 8081 2525
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s CMD ["webordinary", "health", "--server", "http://127.0.0.1:8080"]
ENTRYPOINT ["webordinary"]
CMD ["serve"]
