-- SAML 2.0 sign-in.
--
-- An assertion consumer service receives the IdP's POST without the browser's SameSite=Lax
-- cookie, so a SAML sign-in finishes in two steps: the ACS verifies the response and parks
-- the verified login on its sign-in request (under a new one-time key); the browser then
-- comes back by a top-level GET that carries the cookie, which must match the one that
-- started the sign-in.
ALTER TABLE sso_requests ADD COLUMN verified TEXT;

-- Assertion IDs already used, kept until the assertion would have expired anyway: the same
-- assertion is never accepted twice.
CREATE TABLE saml_assertions (
    id_hash       TEXT PRIMARY KEY,
    provider_id   TEXT NOT NULL REFERENCES identity_providers(id) ON DELETE CASCADE,
    expires_at    BIGINT NOT NULL
);
CREATE INDEX saml_assertions_expiry ON saml_assertions (expires_at);
