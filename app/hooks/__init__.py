"""Each module here exports `install(app)`: middleware, metrics, security headers, startup tasks."""
