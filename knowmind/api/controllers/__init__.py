"""Thin HTTP controllers: parse, call a service, shape the response."""
