-- Client certificates on a raw TCP route with TLS: the PEM of the certificate authorities a
-- client's certificate must chain to (NULL: no client certificate asked; the allowed
-- networks still apply).
ALTER TABLE gateway_tcp_routes ADD COLUMN client_ca TEXT;
