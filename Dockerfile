# syntax=docker/dockerfile:1
# Build stage: compile TypeScript and the native SQLite binding, then drop dev dependencies.
FROM node:20-bookworm-slim AS build
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json index.ts app.ts ./
COPY src ./src
COPY routes ./routes
COPY plugins ./plugins
COPY schemas ./schemas
COPY cli ./cli
RUN npm run build && npm prune --omit=dev

# Runtime stage: compiled JavaScript only, as the unprivileged `node` user.
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    FLEETPLANE_DATA_DIR=/data \
    FLEETPLANE_HTTP_PORT=8080
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json ./package.json
COPY --from=build --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/dist ./dist
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080 8090
# The primary finishes in-flight requests on SIGTERM (shutdown.timeoutMs, default 12 s): give the
# container's stop timeout more than that (docker stop -t 20).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.FLEETPLANE_HTTP_PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["start"]
