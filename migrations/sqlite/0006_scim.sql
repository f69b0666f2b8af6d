-- SCIM 2.0 provisioning: one bearer token per tenant (stored as SHA-256), and what SCIM knows
-- about a user.
CREATE TABLE scim_tokens (
    tenant_id   TEXT PRIMARY KEY REFERENCES tenants(id),
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL
);

-- The IdP's id for the user (SCIM externalId).
ALTER TABLE users ADD COLUMN external_id TEXT;
-- 'scim' for users an IdP pushed before they ever signed in; their first SSO sign-in links
-- to them by username.
ALTER TABLE users ADD COLUMN provisioned_by TEXT;
