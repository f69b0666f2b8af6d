-- SCIM keeps what a client sent, so its PATCH and PUT answer with the values they set.
-- The displayName a SCIM client gave a group (NULL: its name) and the client's id for it;
-- the group keeps its name, which access rules and queues refer to.
ALTER TABLE groups ADD COLUMN display_name TEXT;
ALTER TABLE groups ADD COLUMN external_id TEXT;
-- The SCIM `name` of a user (formatted, givenName, familyName, ...) as JSON.
ALTER TABLE users ADD COLUMN scim_name TEXT;
