# syntax=docker/dockerfile:1
# Build stage: compile TypeScript and the native SQLite binding, then drop dev dependencies.
# Node 24 is the active LTS line; the code itself runs on Node 20.19 and later too.
FROM node:24-bookworm-slim AS build
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json index.ts app.ts primary-routes.ts ./
COPY src ./src
COPY routes ./routes
COPY plugins ./plugins
COPY schemas ./schemas
COPY cli ./cli
# The dashboard's page, scripts and styles, served as they are (no build step).
COPY dashboard ./dashboard
RUN npm run build && npm prune --omit=dev

# Runtime stage: compiled JavaScript only, as the unprivileged `node` user.
FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    FLEETPLANE_DATA_DIR=/data \
    FLEETPLANE_HTTP_PORT=8080
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json ./package.json
COPY --from=build --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/dist ./dist
COPY --from=build --chown=root:root /app/dashboard ./dashboard
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080 8090
# Configuration: mount a file at /app/fleetplane.config.json (read from the working directory), or set
# FLEETPLANE_* variables. The data directory is the /data volume.
# The primary finishes in-flight requests on SIGTERM (shutdown.timeoutMs, default 12 s): Docker's default
# stop timeout is 10 s, so give it more (`docker stop -t 30`, compose `stop_grace_period: 30s`).
STOPSIGNAL SIGTERM
# Asked through the control socket in /data, not over HTTP: it needs neither the port (wherever the
# configuration put it) nor a host name, and no tenant's state (shedding, cordons) changes its answer.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "dist/cli/main.js", "ctl", "status", "--master", "--timeout", "3000"]
ENTRYPOINT ["node", "--max-semi-space-size=2", "dist/cli/main.js"]
CMD ["start"]
