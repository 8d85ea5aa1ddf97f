#!/bin/sh
# Runs once, when the PostgreSQL container initialises an empty data directory
# (docker-entrypoint-initdb.d). The migrations create the row-level-security role knowmind_app
# without a password when it is missing; creating it here first, with the password from the
# environment (APP_DB_PASSWORD, from deploy/.env), lets the server connect as it over TCP.
# psql's :'pw' quotes the value, so no password character can break the statement.
set -eu
: "${APP_DB_PASSWORD:?APP_DB_PASSWORD is not set (see deploy/.env.example)}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  --set=pw="$APP_DB_PASSWORD" <<'SQL'
CREATE ROLE knowmind_app LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD :'pw';
SQL
