"""Who a request acts as, and what it may see: API tokens made and checked (``tokens``),
created and revoked with their audit rows (``admin``), the bearer of a request
(``authenticator``), a dashboard's signed-in browser (``session``), and what a
token's queue and type restrictions hide (``access``). The HTTP API and the dashboard
both use these; neither imports the other for them (docs/security.md)."""
