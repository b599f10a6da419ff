"""Pydantic request/response schemas shared by the API, the CLI and the web pages."""
