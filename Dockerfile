# syntax=docker/dockerfile:1
# passkey-idp in a container: docs/deploy-docker.md.
#
#   docker build -t passkey-idp .
#   docker run --read-only -v idp-data:/data -p 8080:8080 -e PUBLIC_URL=https://idp.example.org passkey-idp
#
# Three stages: `build` compiles the TypeScript (npm ci runs the build, which writes dist/: the
# compiled service, its package.json and the lock); `production` installs only the production
# dependencies into that directory, the pinned Node.js 24 runtime (the `node` package) among them;
# the final image holds that directory on a distroless base (glibc and libstdc++, no shell, no
# package manager) and runs as an unprivileged user. Only /data is written to.

ARG BUILD_IMAGE=node:24-bookworm-slim
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json ./
COPY scripts/ scripts/
COPY src/ src/
RUN npm ci --no-audit --no-fund

FROM ${BUILD_IMAGE} AS production
WORKDIR /app
COPY --from=build /src/dist/ ./
# The data directory is created here (relative to /app: ../data is /data), since the runtime image has no shell.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force && mkdir ../data

FROM ${RUNTIME_IMAGE}
WORKDIR /app
COPY --from=production /app/ ./
COPY --from=production --chown=65532:65532 /data/ /data/
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data
USER 65532:65532
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/app/node_modules/.bin/node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/readyz`).then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))"]
# The flags of `npm start` (dist/package.json); `docker run ... passkey-idp org list` runs an admin command instead.
ENTRYPOINT ["/app/node_modules/.bin/node", "--enable-source-maps", "--max-heap-size=256", "--max-semi-space-size=8", "--min-semi-space-size=8", "--no-allocation-site-pretenuring", "--heap-growing-percent=100", "src/main.js"]
CMD ["serve"]
