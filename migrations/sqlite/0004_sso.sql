-- Single sign-on per tenant: identity providers (OIDC now; SAML and LDAP use the same table),
-- the link from an IdP subject to a user, sign-ins in flight, and where a membership came from.

CREATE TABLE identity_providers (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    -- URL-safe, unique in the tenant: /auth/sso/{tenant}/{name}
    name          TEXT NOT NULL,
    display_name  TEXT NOT NULL,
    kind          TEXT NOT NULL,
    enabled       BIGINT NOT NULL DEFAULT 1,
    -- JSON: the kind's settings (issuer, client id, claim names, scopes) and group sync rules
    config        TEXT NOT NULL,
    -- The client secret the IdP issued us; write-only through the API
    secret        TEXT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE external_identities (
    provider_id   TEXT NOT NULL REFERENCES identity_providers(id) ON DELETE CASCADE,
    subject       TEXT NOT NULL,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at    BIGINT NOT NULL,
    last_login_at BIGINT NOT NULL,
    PRIMARY KEY (provider_id, subject)
);
CREATE INDEX external_identities_user ON external_identities (user_id);

-- One row per sign-in started and not yet finished; deleted when used (single use).
CREATE TABLE sso_requests (
    -- digest of the OIDC `state`
    id_hash       TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    provider_id   TEXT NOT NULL REFERENCES identity_providers(id) ON DELETE CASCADE,
    -- digest of the cookie that binds the sign-in to the browser that started it
    browser_hash  TEXT NOT NULL,
    nonce         TEXT NOT NULL,
    pkce_verifier TEXT NOT NULL,
    next          TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL
);

-- 'local' (added by an admin) or the id of the identity provider that manages it: sign-in
-- sync adds and removes only the memberships its provider manages.
ALTER TABLE memberships ADD COLUMN source TEXT NOT NULL DEFAULT 'local';

-- A tenant may turn off password sign-in (local accounts of platform admins still work).
ALTER TABLE tenants ADD COLUMN password_login BIGINT NOT NULL DEFAULT 1;
