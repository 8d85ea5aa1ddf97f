-- The migrations create the row-level-security role knowmind_app (without a password);
-- creating it here first with a password lets the server connect as it over TCP.
CREATE ROLE knowmind_app LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD 'knowmind_app';
