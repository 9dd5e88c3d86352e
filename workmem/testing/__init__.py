"""Tools for tests and development, not for production: :mod:`workmem.testing.upstash_bridge`, a local stand-in
for the Upstash REST API in front of a redis-server, and :mod:`workmem.testing.sqld`, a real libSQL server
(``sqld``) started and stopped by pid."""
