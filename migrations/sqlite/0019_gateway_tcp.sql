-- Raw TCP routes: a listener port of its own (from gateway_tcp_ports) on one of a tenant's
-- gateways, forwarded to an endpoint's instances; only the listed source networks may
-- connect; with tls = 1 the gateway's certificate terminates TLS first.
CREATE TABLE gateway_tcp_routes (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    gateway_id   TEXT NOT NULL REFERENCES gateways(id) ON DELETE CASCADE,
    endpoint_id  TEXT NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    port         BIGINT NOT NULL UNIQUE,
    tls          BIGINT NOT NULL DEFAULT 0,
    -- Comma-separated networks (CIDR), at least one.
    sources      TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE INDEX gateway_tcp_routes_tenant ON gateway_tcp_routes (tenant_id, gateway_id);
